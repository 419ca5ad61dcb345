/**
 * @module `npm run bench -- embed` (issue 15, item 4): the same work through the C host (libkvgate, the core compiled
 * by wasm2c; bench/embed-host.c) and through the JS host (KvIndex over WebAssembly) in one run: an engine's vLLM
 * msgpack KV-event cycle applied (decoded in the core), the same cycle as binary batches, and find_matches (hash +
 * match) of 4k-token prompts over 16 workers. The C host runs in both builds of embed/build.sh: `bounds` (the default:
 * checked memory accesses, every trap a status) and `guard` (guard pages, faster). Results are checked equal on every
 * host; times are reported as ratios JS / C (> 1: the C host is faster), medians over interleaved samples.
 * JSON into bench/results/embed.json. Flags: --samples N (15 per host, after --warmup N: 3; the hosts take turns
 * sample by sample), --cycles N (2), --rounds N (10), --quick.
 */
import { execFileSync, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadCoreModule } from "../src/wasm/module-fs.ts";
import { KvIndex } from "../src/core/kv-index.ts";
import { EventBatchWriter } from "../src/core/event-encoder.ts";
import { EngineBatchCodec } from "../src/core/kv-index-engine-batch.ts";
import { BASE_SEED } from "../src/core/hash-seeds.ts";
import { seededRandom } from "../src/core/seeded-random.ts";
import { buildWorkload } from "./events-workload.ts";
import { fmtRatio, now, percentile, table, writeResults } from "./harness.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const SLOTS = 17, EVENT_SLOT = 16, CAPACITY = 1 << 20, SALT = 0x5eed, PROMPTS = 32, TOKENS = 4096, BLOCK = 16;

interface Sample { engine_ms: number; binary_ms: number; match_ms: number }
interface HostRun { setup_entries: number; samples: Sample[]; matched: number; applied: number; entries: number }

interface Args { samples: number; warmup: number; cycles: number; rounds: number }

function parseArgs(argv: string[]): Args {
  const a: Args = { samples: 15, warmup: 3, cycles: 2, rounds: 10 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]!;
    if (k === "--quick") Object.assign(a, { samples: 4, warmup: 2, cycles: 1, rounds: 4 });
    else if (k === "--samples" || k === "--warmup" || k === "--cycles" || k === "--rounds") a[k.slice(2) as keyof Args] = Number(argv[++i]);
    else throw new Error(`unknown flag ${k}`);
  }
  return a;
}

/** Length-prefixed little-endian sections, the format bench/embed-host.c reads. */
class Writer {
  parts: Uint8Array[] = [];
  u32(...v: number[]): this {
    this.parts.push(new Uint8Array(new Uint32Array(v).buffer));
    return this;
  }
  blobs(list: readonly Uint8Array[]): this {
    this.u32(list.length);
    for (const b of list) this.u32(b.length).parts.push(b);
    return this;
  }
  bytes(): Uint8Array {
    return Buffer.concat(this.parts);
  }
}

async function workload(): Promise<{ setup: Uint8Array[]; engine: Uint8Array[]; binary: Uint8Array[]; prompts: Uint32Array[] }> {
  const w = buildWorkload({ seed: 15, blocksPerBatch: 128, capacityBlocks: 8192, batches: 400, blockSize: BLOCK });
  const rnd = seededRandom(15);
  const prompts = Array.from({ length: PROMPTS }, () => Uint32Array.from({ length: TOKENS }, () => rnd.int(152_000)));
  // Every worker caches a random leading part of some prompts: matches of varied depth across the fleet.
  const hasher = new KvIndex(await loadCoreModule("release"), { capacity: 1024, maxSlots: 1, salt: BigInt(SALT) });
  const setup: Uint8Array[] = [];
  for (let slot = 0; slot < 16; slot++) {
    const batch = new EventBatchWriter();
    for (let p = 0; p < PROMPTS; p++) {
      if (rnd.next() < 0.5) continue;
      const { local } = hasher.hash(prompts[p]!, { blockSize: BLOCK });
      const depth = 1 + rnd.int(local.length);
      batch.stored(slot, null, local.slice(0, depth).map((_, i) => BigInt(slot * 1_000_000 + p * 1000 + i)), local.slice(0, depth));
    }
    setup.push(batch.bytes().slice());
  }
  return { setup, engine: w.payloads.array, binary: w.binary(EVENT_SLOT), prompts };
}

type Build = "bounds" | "guard";
type HostName = Build | "js";
const BUILD_DIR: Record<Build, string> = { bounds: "build/embed", guard: "build/embed-guard" };
type Totals = Omit<HostRun, "samples">;

interface Host {
  sample(): Promise<Sample>;
  finish(): Promise<Totals>;
}

/** A C host process: one sample per request, so its samples interleave with the other hosts'. */
function cHost(build: Build, file: string, a: Args): Host {
  const child = spawn(join(ROOT, BUILD_DIR[build], "bin/embed-host"), [file, String(a.cycles), String(a.rounds)], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<unknown> => {
    const r = await lines.next();
    if (r.done) throw new Error(`embed-host (${build}) ended early`);
    return JSON.parse(r.value);
  };
  return {
    sample: () => (child.stdin!.write("s\n"), next() as Promise<Sample>),
    finish: async () => {
      child.stdin!.end("q\n");
      return (await next()) as Totals;
    },
  };
}

async function jsHost(wl: Awaited<ReturnType<typeof workload>>, a: Args): Promise<Host> {
  // Every block probed, as the C host does by default (kvgate_match_jump not called): the hosts do the same work.
  const idx = new KvIndex(await loadCoreModule("release"), { maxSlots: SLOTS, capacity: CAPACITY, salt: BigInt(SALT), matchJump: 1 });
  for (let s = 0; s < SLOTS; s++) idx.slotFor(`w${s}`, 0);
  for (const b of wl.setup) idx.applyBatch(b);
  const setupEntries = idx.stats().entries;
  const codec = EngineBatchCodec.for(idx);
  const policy = { blockSize: BLOCK, kvGroup: -1, indexDevice: true, dropForeignExtraKeys: true, seedLo: Number(BASE_SEED), seedHi: 0 };
  const slotOf = (): number => EVENT_SLOT;
  let matched = 0, applied = 0;
  return {
    sample: async () => {
      const t0 = now();
      for (let c = 0; c < a.cycles; c++) {
        for (const p of wl.engine) {
          const r = codec.decodeApply(p, policy, slotOf);
          if (typeof r === "string" || r.applyError) throw new Error(`engine batch not applied in the core: ${String(r)}`);
          applied += r.records;
        }
      }
      const t1 = now();
      for (let c = 0; c < a.cycles; c++) for (const b of wl.binary) applied += idx.applyBatch(b).records;
      const t2 = now();
      for (let r = 0; r < a.rounds; r++) {
        for (const p of wl.prompts) {
          const n = idx.route(p, { blockSize: BLOCK });
          for (let k = 0; k < n; k++) matched += idx.matches.depth(k) + idx.treeSizeOfSlot(idx.matches.slot(k));
        }
      }
      return { engine_ms: t1 - t0, binary_ms: t2 - t1, match_ms: now() - t2 };
    },
    finish: async () => ({ setup_entries: setupEntries, matched, applied, entries: idx.stats().entries }),
  };
}

export async function main(argv: string[]): Promise<void> {
  const a = parseArgs(argv);
  for (const m of ["bounds", "guard"] as const) {
    execFileSync("bash", [join(ROOT, "embed/build.sh")], { stdio: "inherit", env: { ...process.env, KVGATE_MEMCHECK: m } });
  }
  const wl = await workload();
  const file = join(mkdtempSync(join(tmpdir(), "kvgate-bench-embed-")), "workload.bin");
  const w = new Writer().u32(SLOTS, CAPACITY, EVENT_SLOT, SALT).blobs(wl.setup).blobs(wl.engine).blobs(wl.binary).u32(PROMPTS, TOKENS);
  for (const p of wl.prompts) w.parts.push(new Uint8Array(p.buffer));
  writeFileSync(file, w.bytes());
  console.log(`embed: ${wl.engine.length} engine batches per cycle, ${wl.prompts.length} prompts of ${TOKENS} tokens, ${SLOTS - 1} workers; ` +
    `${a.samples} samples per host after ${a.warmup} warm-up (C bounds, C guard, JS interleaved), ${a.cycles} cycles, ${a.rounds} match rounds per sample`);
  // Sample by sample, in rotating order, so drift in the machine's load hits every host alike.
  const hosts: Record<HostName, Host> = { bounds: cHost("bounds", file, a), guard: cHost("guard", file, a), js: await jsHost(wl, a) };
  const order: HostName[] = ["bounds", "guard", "js"];
  const samples: Record<HostName, Sample[]> = { bounds: [], guard: [], js: [] };
  for (let i = 0; i < a.warmup + a.samples; i++) {
    for (let k = 0; k < order.length; k++) {
      const h = order[(i + k) % order.length]!;
      const sample = await hosts[h].sample();
      if (i >= a.warmup) samples[h].push(sample);
    }
  }
  const runs = {} as Record<HostName, HostRun>;
  for (const h of order) runs[h] = { ...(await hosts[h].finish()), samples: samples[h] };
  rmSync(dirname(file), { recursive: true, force: true });
  const all = order.map((h) => runs[h]);
  for (const k of ["setup_entries", "matched", "applied", "entries"] as const) {
    const vals = all.map((r) => r[k]);
    if (new Set(vals).size !== 1) throw new Error(`hosts disagree on ${k}: ${vals.join(" ")}`);
  }
  const med = (h: HostRun, k: keyof Sample): number => percentile(h.samples.map((s) => s[k]), 50);
  const batches = a.cycles * wl.engine.length, prompts = a.rounds * wl.prompts.length;
  const rows = (["engine_ms", "binary_ms", "match_ms"] as const).map((k) => {
    const per = 1000 / (k === "match_ms" ? prompts : batches);
    const bounds = med(runs.bounds, k) * per, guard = med(runs.guard, k) * per, js = med(runs.js, k) * per;
    const what = k === "engine_ms" ? "vLLM msgpack batch apply /batch" : k === "binary_ms" ? "binary batch apply /batch" : "find_matches, 4k-token prompt /prompt";
    return { what, boundsUs: bounds, guardUs: guard, jsUs: js, jsOverBounds: js / bounds, jsOverGuard: js / guard };
  });
  console.log(table(["operation", "C bounds µs", "C guard µs", "JS µs", "JS / C bounds", "JS / C guard"],
    rows.map((r) => [r.what, r.boundsUs.toFixed(2), r.guardUs.toFixed(2), r.jsUs.toFixed(2), fmtRatio(r.jsOverBounds), fmtRatio(r.jsOverGuard)])));
  for (const [name, key] of [["bounds (default)", "jsOverBounds"], ["guard", "jsOverGuard"]] as const) {
    const slower = rows.filter((r) => r[key] < 1);
    console.log(`C ${name}: ${slower.length === 0 ? "not slower than JS on any operation" : `slower than JS on ${slower.map((r) => r.what).join(", ")}`}`);
  }
  const path = writeResults("embed", { args: a, checks: { matched: all[0]!.matched, applied: all[0]!.applied }, rows, runs });
  console.log(`results: ${path}`);
}
