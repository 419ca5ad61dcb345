/**
 * @module `npm run bench -- snapshot`: what a warm restart costs (issue 14). An index filled with Stored events is dumped,
 * sealed (SHA-256), decoded and loaded into a fresh instance; the baseline is rebuilding the same index by applying the
 * same events as binary batches (the least a replica replaying the event stream must do, before any msgpack decoding).
 *
 * Flags: --entries N (131072: 2048 prompts of 64 blocks over 8 workers)  --samples N (7). Measured, never asserted.
 */
import { createKvIndex } from "../src/core/create-kv-index.ts";
import { EventBatchWriter } from "../src/core/event-encoder.ts";
import { dumpIndex, loadIndexDump } from "../src/core/index-snapshot.ts";
import type { KvIndex } from "../src/core/kv-index.ts";
import { seededRandom } from "../src/core/seeded-random.ts";
import { decodeSnapshot, encodeSnapshot } from "../src/replicas/snapshot-format.ts";
import { environment, fmtRatio, percentile, table, writeResults } from "./harness.ts";

const BLOCKS = 64;
const WORKERS = 8;

function parse(argv: string[]): { entries: number; samples: number } {
  const a = { entries: 1 << 17, samples: 7 };
  for (let i = 0; i < argv.length; i += 2) {
    const n = Number(argv[i + 1]);
    if (!Number.isInteger(n) || n <= 0) throw new Error(`${argv[i]} needs a positive integer`);
    if (argv[i] === "--entries") a.entries = n;
    else if (argv[i] === "--samples") a.samples = n;
    else throw new Error(`unknown flag ${argv[i]}`);
  }
  return a;
}

async function fresh(capacity: number): Promise<KvIndex> {
  const index = await createKvIndex({ capacity, maxSlots: 16 });
  for (let w = 0; w < WORKERS; w++) index.slotFor(`w${w}`, 0);
  return index;
}

/** Median ms of `samples` runs of `op` on a fresh state `setup` builds untimed. */
async function time<S>(samples: number, setup: () => Promise<S>, op: (s: S) => unknown): Promise<number> {
  const ms: number[] = [];
  for (let i = 0; i < samples + 1; i++) {
    const s = await setup();
    const t0 = performance.now();
    await op(s);
    if (i > 0) ms.push(performance.now() - t0);
  }
  return percentile(ms, 50);
}

export async function main(argv: string[]): Promise<void> {
  const a = parse(argv);
  const prompts = Math.ceil(a.entries / BLOCKS);
  const capacity = prompts * BLOCKS;
  const rnd = seededRandom(14);
  const w = new EventBatchWriter();
  const batches: Uint8Array[] = [];
  for (let p = 0; p < prompts; p++) {
    const hashes = Array.from({ length: BLOCKS }, () => rnd.u64());
    const locals = Array.from({ length: BLOCKS }, () => rnd.u64());
    w.reset();
    w.stored(p % WORKERS, null, hashes, locals);
    batches.push(w.bytes().slice());
  }
  const apply = (index: KvIndex) => {
    for (const b of batches) index.applyBatch(b);
  };
  const full = await fresh(capacity);
  apply(full);
  const entries = full.stats().entries;
  const dump = dumpIndex(full, 0);
  const snap = { replica: "bench", streamSeq: prompts, takenAt: Date.now(), index: dump, sessions: [], streams: [] };
  const bytes = await encodeSnapshot(snap);

  const rebuild = await time(a.samples, () => fresh(capacity), apply);
  const dumpMs = await time(a.samples, async () => full, (i) => dumpIndex(i, 0));
  const sealMs = await time(a.samples, async () => snap, (s) => encodeSnapshot(s));
  const openMs = await time(a.samples, async () => bytes, (b) => decodeSnapshot(b));
  const loadMs = await time(a.samples, () => fresh(capacity), (i) => loadIndexDump(i, dump, 0, () => true));
  const restart = openMs + loadMs;
  const rows = [
    ["rebuild from events (baseline)", rebuild.toFixed(1), fmtRatio(1)],
    ["dump", dumpMs.toFixed(1), fmtRatio(dumpMs / rebuild)],
    ["seal (SHA-256)", sealMs.toFixed(1), fmtRatio(sealMs / rebuild)],
    ["decode + verify", openMs.toFixed(1), fmtRatio(openMs / rebuild)],
    ["load", loadMs.toFixed(1), fmtRatio(loadMs / rebuild)],
    ["restart (decode + load)", restart.toFixed(1), fmtRatio(restart / rebuild)],
  ];
  console.log(`snapshot of ${entries} entries, ${(bytes.length / 1048576).toFixed(1)} MiB; median of ${a.samples} runs`);
  console.log(table(["step", "ms", "vs rebuild"], rows));
  const path = writeResults("snapshot", {
    config: a, environment: environment(), entries, bytes: bytes.length,
    ms: { rebuild, dump: dumpMs, seal: sealMs, decode: openMs, load: loadMs, restart }, restartVsRebuild: restart / rebuild,
  });
  console.log(`results: ${path}`);
}
