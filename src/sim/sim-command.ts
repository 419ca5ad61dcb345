/**
 * @module `kvgate sim`: parses the command line into engine, server and KV-event options and serves one simulated
 * engine until the host says stop. Serving itself is the host's job (src/adapter/node/sim-server.ts on Node), so this
 * module stays free of runtime APIs.
 */
import { KvgateError } from "../core/errors.ts";
import { parseFlags } from "../cli/flags.ts";
import type { KvEventEncoding } from "./kv-event-codec.ts";
import type { SimEngineOptions } from "./sim-options.ts";

export const SIM_USAGE = `usage: kvgate sim [options]
  Serves a simulated vLLM-compatible engine (OpenAI API, /metrics, /tokenize) with a paged KV cache,
  continuous batching and the Dynamo mocker's timing model.
  --host H                   listen address (default 127.0.0.1)
  --port N                   listen port (default 8000; 0 = any free port)
  --model NAME               served model name (default kvgate-sim)
  --lora-adapters A,B        LoRA adapters served beside it, each under its own model name (listed in
                             /v1/models with the model as parent; their blocks and KV events carry lora_name)
  --worker-id ID             worker id on KV-event batches (default sim-<port>)
  --dp-rank N                data-parallel rank (default 0)
  --num-gpu-blocks N         KV blocks (default 16384)
  --block-size N             tokens per block (default 16)
  --max-num-seqs N           concurrent sequences (default 256)
  --max-num-batched-tokens N tokens per step (default 8192)
  --max-model-len N          prompt + output limit (default 32768)
  --speedup X                divide step times by X (default 1)
  --decode-speedup X         further divide decode times by X (default 1)
  --default-max-tokens N     output length when a request sets none (default 32)
  --role R                   aggregated (default), prefill or decode: disaggregated serving, vLLM
                             kv_transfer_params or SGLang bootstrap_host/port/room (the bootstrap port
                             is this engine's own HTTP port)
  --kv-transfer-timeout-ms N prefill: release KV a decode has not read after N ms (default 480000)
  --bootstrap-timeout-ms N   decode: fail when the prefill of a bootstrap room is not there in N ms (default 60000)
  --no-prefix-caching        no block reuse, no KV events
  --no-chunked-prefill       whole prompts only
  --events-url URL           POST KV-event batches (msgpack) to this URL
  --events-token T           bearer token for --events-url (or env KVGATE_EVENTS_TOKEN)
  --events-encoding E        array (default, vLLM <= 0.25) or map (vLLM >= 0.26)
  --events-flush-ms N        longest wait before a batch is sent (default 10)`;

export interface SimEventOptions {
  url: string;
  token?: string;
  encoding?: KvEventEncoding;
  flushIntervalMs?: number;
}

export interface SimCommandConfig {
  host: string;
  port: number;
  engine: SimEngineOptions;
  events?: SimEventOptions;
}

const SPEC = {
  host: "value", port: "value", model: "value", "lora-adapters": "value", "worker-id": "value", "dp-rank": "value", "num-gpu-blocks": "value",
  "block-size": "value", "max-num-seqs": "value", "max-num-batched-tokens": "value", "max-model-len": "value",
  speedup: "value", "decode-speedup": "value", "default-max-tokens": "value", "no-prefix-caching": "bool",
  "no-chunked-prefill": "bool", "events-url": "value", "events-token": "value", "events-encoding": "value",
  "events-flush-ms": "value", role: "value", "kv-transfer-timeout-ms": "value", "bootstrap-timeout-ms": "value", help: "bool",
} as const;

function num(flags: Record<string, string | boolean>, name: string): number | undefined {
  const v = flags[name];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (typeof v !== "string" || v.trim() === "" || !Number.isFinite(n)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--${name} must be a number, got ${JSON.stringify(v)}`);
  return n;
}

function str(flags: Record<string, string | boolean>, name: string): string | undefined {
  const v = flags[name];
  return typeof v === "string" ? v : undefined;
}

/** The configuration a command line asks for (engine options are validated when the engine is built). */
export function parseSimArgs(args: readonly string[], env: Record<string, string | undefined> = {}): SimCommandConfig | "help" {
  const { flags, positional } = parseFlags(args, SPEC);
  if (flags.help) return "help";
  if (positional.length > 0) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `unexpected argument ${JSON.stringify(positional[0])}`);
  const port = num(flags, "port") ?? 8000;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--port must be 0..65535`);
  const engine: SimEngineOptions = {
    model: str(flags, "model"),
    loraAdapters: str(flags, "lora-adapters")?.split(",").map((a) => a.trim()).filter(Boolean),
    workerId: str(flags, "worker-id"),
    dpRank: num(flags, "dp-rank"),
    numGpuBlocks: num(flags, "num-gpu-blocks"),
    blockSize: num(flags, "block-size"),
    maxNumSeqs: num(flags, "max-num-seqs"),
    maxNumBatchedTokens: num(flags, "max-num-batched-tokens"),
    maxModelLen: num(flags, "max-model-len"),
    speedupRatio: num(flags, "speedup"),
    decodeSpeedupRatio: num(flags, "decode-speedup"),
    defaultMaxTokens: num(flags, "default-max-tokens"),
    enablePrefixCaching: flags["no-prefix-caching"] ? false : undefined,
    enableChunkedPrefill: flags["no-chunked-prefill"] ? false : undefined,
    role: str(flags, "role") as SimEngineOptions["role"],
    kvTransferTimeoutMs: num(flags, "kv-transfer-timeout-ms"),
    bootstrapTimeoutMs: num(flags, "bootstrap-timeout-ms"),
  };
  const config: SimCommandConfig = { host: str(flags, "host") ?? "127.0.0.1", port, engine };
  const url = str(flags, "events-url");
  if (url) {
    const encoding = str(flags, "events-encoding") ?? "array";
    if (encoding !== "array" && encoding !== "map") throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--events-encoding must be array or map`);
    config.events = { url, token: str(flags, "events-token") ?? env.KVGATE_EVENTS_TOKEN, encoding, flushIntervalMs: num(flags, "events-flush-ms") };
  } else if (flags["events-token"] || flags["events-encoding"] || flags["events-flush-ms"]) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "--events-* options need --events-url");
  }
  return config;
}

export interface RunningSim {
  url: string;
  close(): Promise<void>;
}

/** What the command needs from the runtime. */
export interface SimHost {
  /** Builds the engine and starts serving it. */
  start(config: SimCommandConfig): Promise<RunningSim>;
  write(text: string): void;
  /** Resolves when the process is asked to stop (SIGINT/SIGTERM on Node). */
  stopped(): Promise<void>;
  env?: Record<string, string | undefined>;
}

/** Runs `kvgate sim`; resolves to the exit code. */
export async function runSimCommand(args: readonly string[], host: SimHost): Promise<number> {
  const config = parseSimArgs(args, host.env);
  if (config === "help") {
    host.write(SIM_USAGE + "\n");
    return 0;
  }
  const sim = await host.start(config);
  const model = config.engine.model ?? "kvgate-sim";
  host.write(`kvgate sim: serving ${model} at ${sim.url}${config.events ? `, KV events to ${config.events.url}` : ""}\n`);
  host.write(`  curl ${sim.url}/v1/chat/completions -H 'content-type: application/json' -d '{"model":"${model}","messages":[{"role":"user","content":"Hello"}],"stream":true}'\n`);
  await host.stopped();
  await sim.close();
  host.write("kvgate sim: stopped\n");
  return 0;
}
