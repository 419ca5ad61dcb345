/** @module `kvgate replay` command line: options, defaults and validation into a ReplayConfig. */
import { parseFlags } from "../cli/flags.ts";
import { KvgateError } from "../core/errors.ts";
import { parsePolicies, REPLAY_POLICIES, type ReplayPolicy } from "./replay-policies.ts";
import { parseFaults, type ReplayFault } from "./replay-faults.ts";
import { parseSlice, type TraceWindow } from "./replay-request.ts";
import { GENERATOR_DEFAULTS, type GeneratorOptions } from "./workload-generator.ts";

export const REPLAY_USAGE = `usage: kvgate replay [options]
  Replays a request trace (or a built-in seeded workload) through kvgate's router onto a fresh fleet of simulated
  engines once per routing policy, over HTTP with streaming, and writes a JSON result and an HTML report.
  --trace PATH|URL           Mooncake JSONL (timestamp, input_length, output_length, hash_ids of 512-token blocks)
                             or Azure CSV (TIMESTAMP,ContextTokens,GeneratedTokens); default: built-in workload
  --format F                 mooncake | azure (default: by extension, .csv = azure)
  --slice START:END          requests START..END-1 of the trace (either side may be empty)
  --limit N                  at most N requests (after --slice)
  --requests N               built-in workload: number of requests (default ${GENERATOR_DEFAULTS.requests})
  --session-rate X           built-in workload: new sessions per second (default ${GENERATOR_DEFAULTS.sessionsPerSec})
  --workers N                simulated engines per policy (default 4)
  --speedup S                arrivals S times faster than the trace's timestamps (default 1)
  --sim-speedup R            engines run R times faster than wall time; reported times are engine time. Higher is
                             quicker but any stall of this machine counts R times (default 3)
  --policies LIST            comma-separated: ${REPLAY_POLICIES.join(", ")} (default all)
  --num-gpu-blocks N         KV blocks per engine (default 4096)
  --block-size N             tokens per KV block (default 64, the Dynamo mocker's)
  --max-num-batched-tokens N tokens per engine step (default 8192)
  --max-num-seqs N           concurrent sequences per engine (default 256)
  --max-model-len N          context limit (default: the longest request of the run, at least 32768)
  --model NAME               served model name (default kvgate-sim)
  --overlap-weight W         the kv policies' cost weight of prefill blocks (default: kvgate's, 16); the dynamo
                             policies keep the reference's 1
  --new-prefill-factor A     the kv policies' weight of a block the prompt must prefill over one queued on the
                             worker (default: kvgate's); the dynamo policies keep the reference's 1
  --no-hot-prefix-spread     the kv policies score every worker for every prompt (ablation)
  --no-inflight-cached       kv_events counts only blocks the engines' events reported as cached (ablation)
  --no-closed-loop           the kv policies never act on reported hits (ablation: open loop, all else kvgate's)
  --seed N                   routing randomness seed, the same for every policy (default 42); also the workload's
  --sample-ms N              engine ms between per-worker load samples (default: about 200 samples per run)
  --warmup N                 first N requests replayed once, unmeasured, before the policies, so the first
                             policy does not pay for a cold JIT (default 50; 0 = none)
  --faults LIST              faults injected the same way into every policy's fleet, comma-separated:
                             lose_cache:W@F  engine wW forgets its cache without a KV event after share F of the requests
                             lose_events:W@F engine wW restarts after share F and its KV events never reach the router again
                             small_cache:W@F engine wW has F x --num-gpu-blocks while the router assumes the full size
                             each policy also runs once without them, and the report shows how far it recovered
  --no-fault-baseline        with --faults, skip the fault-free run of each policy
  --out PREFIX               writes PREFIX.json and PREFIX.html (default kvgate-replay)
  --json PATH, --html PATH   override either output path
  --decision-log FILE        log every routing decision for \`kvgate explain\`: one file per policy, the policy's name
                             before the extension (decisions.jsonl → decisions.kv_events.jsonl; not the warm-up)
  --decision-log-tokens      also log each prompt's tokens (explain then re-hashes them)
  --no-progress              no progress bar on stderr
  --gateway URL[,URL...]     replay through these already-running gateways instead (repeatable): requests go
                             round-robin over them, a gateway that refuses connections is skipped for a second, and
                             no fleet is started. --policies then names the one policy the gateways run (labels only;
                             default kv_events); --workers, --num-gpu-blocks and --block-size should describe their
                             fleet (the ceiling and the predicted hit rate use them); --sim-speedup is the engines'
                             speed-up if they are simulated (default 1: times are wall ms); --warmup defaults to 0
                             (warm-up requests would warm the same engines' caches). The report adds per-gateway
                             requests, errors and hit rates`;

/** Overrides of kvgate's defaults for the kv_* policies, for ablations; the dynamo policies ignore them. */
export interface KvTuning {
  overlapWeight?: number;
  newPrefillFactor?: number;
  hotPrefixSpread?: boolean;
  inflightCached?: boolean;
  closedLoop?: boolean;
}

export interface ReplayConfig {
  trace?: string;
  format?: "mooncake" | "azure";
  window: TraceWindow;
  generator: GeneratorOptions;
  workers: number;
  traceSpeedup: number;
  engineSpeedup: number;
  policies: ReplayPolicy[];
  engine: { numGpuBlocks: number; blockSize: number; maxNumBatchedTokens: number; maxNumSeqs: number; maxModelLen?: number };
  model: string;
  seed: number;
  /** kvgate's own knobs for the kv policies (undefined: kvgate's defaults). */
  kvTuning: KvTuning;
  sampleEveryMs?: number;
  warmup: number;
  faults: ReplayFault[];
  /** With faults: also run each policy without them, for the recovery table (default true). */
  faultBaseline: boolean;
  jsonPath: string;
  htmlPath: string;
  progress: boolean;
  help: boolean;
  /** Decision log path (the policy's name is inserted before the extension); undefined: none. */
  decisionLog?: string;
  decisionLogTokens: boolean;
  /** --gateway: base URLs of running gateways to replay through (empty: start a router and fleet per policy). */
  gateways: string[];
}

const SPEC = {
  trace: "value", format: "value", slice: "value", limit: "value", requests: "value", "session-rate": "value", workers: "value",
  speedup: "value", "sim-speedup": "value", policies: "value", "num-gpu-blocks": "value", "block-size": "value",
  "max-num-batched-tokens": "value", "max-num-seqs": "value", "max-model-len": "value", model: "value", seed: "value", "overlap-weight": "value", "new-prefill-factor": "value", "no-hot-prefix-spread": "bool",
  "no-inflight-cached": "bool", "no-closed-loop": "bool", "no-fault-baseline": "bool",
  "sample-ms": "value", warmup: "value", faults: "value", out: "value", json: "value", html: "value", "no-progress": "bool", help: "bool",
  "decision-log": "value", "decision-log-tokens": "bool",
} as const;

type Flags = Record<string, string | boolean>;

function num(f: Flags, name: string, dflt: number, opts: { int?: boolean; min?: number } = {}): number {
  const v = f[name];
  if (v === undefined) return dflt;
  const n = Number(v);
  const ok = typeof v === "string" && v.trim() !== "" && Number.isFinite(n) && (!opts.int || Number.isInteger(n)) && n >= (opts.min ?? -Infinity);
  if (!ok) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--${name} must be ${opts.int ? "an integer" : "a number"}${opts.min !== undefined ? ` >= ${opts.min}` : ""}, got ${JSON.stringify(v)}`);
  return n;
}

function positive(f: Flags, name: string, dflt: number): number {
  const n = num(f, name, dflt);
  if (!(n > 0)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--${name} must be positive, got ${n}`);
  return n;
}

/** Takes every --gateway (repeatable, each a comma list) out of the arguments, since parseFlags keeps only the last. */
function takeGateways(args: readonly string[]): { rest: string[]; gateways: string[] } {
  const rest: string[] = [], gateways: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--") {
      rest.push(...args.slice(i));
      break;
    }
    let v: string | undefined;
    if (a === "--gateway") {
      v = args[++i];
      if (v === undefined) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "option --gateway needs a value");
    } else if (a.startsWith("--gateway=")) v = a.slice("--gateway=".length);
    else {
      rest.push(a);
      continue;
    }
    for (const u of v.split(",").map((x) => x.trim()).filter(Boolean)) {
      let url: URL;
      try {
        url = new URL(u);
      } catch {
        throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--gateway ${JSON.stringify(u)} is not a URL`);
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--gateway ${u}: use http:// or https://`);
      gateways.push(u.replace(/\/+$/, ""));
    }
  }
  if (args.some((a) => a === "--gateway" || a.startsWith("--gateway=")) && gateways.length === 0) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "--gateway lists no URL");
  }
  return { rest, gateways };
}

export function parseReplayArgs(args: readonly string[]): ReplayConfig {
  const { rest, gateways } = takeGateways(args);
  const { flags: f, positional } = parseFlags(rest, SPEC);
  const viaGateways = gateways.length > 0;
  if (positional.length > 0) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `unexpected argument ${JSON.stringify(positional[0])}`);
  const str = (name: string): string | undefined => (typeof f[name] === "string" ? (f[name] as string) : undefined);
  const format = str("format");
  if (format !== undefined && format !== "mooncake" && format !== "azure") throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--format must be mooncake or azure, got ${format}`);
  const slice = str("slice") !== undefined ? parseSlice(str("slice")!) : { start: 0, end: Infinity };
  const trace = str("trace");
  if (!trace && (str("slice") !== undefined || format)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "--slice and --format need --trace");
  const seed = num(f, "seed", 42, { int: true, min: 0 });
  const out = str("out") ?? "kvgate-replay";
  const maxModelLen = f["max-model-len"] === undefined ? undefined : num(f, "max-model-len", 0, { int: true, min: 2 });
  return {
    trace, format: format as ReplayConfig["format"],
    window: { ...slice, limit: f.limit === undefined ? Infinity : num(f, "limit", 0, { int: true, min: 1 }) },
    generator: { requests: num(f, "requests", GENERATOR_DEFAULTS.requests, { int: true, min: 1 }), sessionsPerSec: positive(f, "session-rate", GENERATOR_DEFAULTS.sessionsPerSec), seed },
    workers: num(f, "workers", 4, { int: true, min: 1 }),
    traceSpeedup: positive(f, "speedup", 1),
    engineSpeedup: positive(f, "sim-speedup", viaGateways ? 1 : 3),
    policies: gatewayPolicies(str("policies"), viaGateways),
    engine: {
      numGpuBlocks: num(f, "num-gpu-blocks", 4096, { int: true, min: 1 }), blockSize: num(f, "block-size", 64, { int: true, min: 1 }),
      maxNumBatchedTokens: num(f, "max-num-batched-tokens", 8192, { int: true, min: 1 }), maxNumSeqs: num(f, "max-num-seqs", 256, { int: true, min: 1 }),
      maxModelLen,
    },
    model: str("model") ?? "kvgate-sim",
    seed,
    kvTuning: {
      ...(f["overlap-weight"] !== undefined && { overlapWeight: num(f, "overlap-weight", 0, { min: 0 }) }),
      ...(f["new-prefill-factor"] !== undefined && { newPrefillFactor: num(f, "new-prefill-factor", 1, { min: 1 }) }),
      ...(f["no-hot-prefix-spread"] === true && { hotPrefixSpread: false }),
      ...(f["no-inflight-cached"] === true && { inflightCached: false }),
      ...(f["no-closed-loop"] === true && { closedLoop: false }),
    },
    sampleEveryMs: f["sample-ms"] === undefined ? undefined : positive(f, "sample-ms", 1),
    warmup: num(f, "warmup", viaGateways ? 0 : 50, { int: true, min: 0 }),
    faults: str("faults") !== undefined ? parseFaults(str("faults")!, num(f, "workers", 4, { int: true, min: 1 })) : [],
    faultBaseline: f["no-fault-baseline"] !== true,
    jsonPath: str("json") ?? `${out}.json`,
    htmlPath: str("html") ?? `${out}.html`,
    progress: f["no-progress"] !== true,
    help: f.help === true,
    decisionLog: str("decision-log"),
    decisionLogTokens: f["decision-log-tokens"] === true,
    gateways,
  };
}

/** Through gateways the replay runs one policy, the one they were started with; it only labels the result. */
function gatewayPolicies(text: string | undefined, viaGateways: boolean): ReplayPolicy[] {
  if (!viaGateways) return text !== undefined ? parsePolicies(text) : [...REPLAY_POLICIES];
  const p = text !== undefined ? parsePolicies(text) : ["kv_events" as const];
  if (p.length !== 1) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "with --gateway, --policies names the one policy the gateways run");
  return p;
}
