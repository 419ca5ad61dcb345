/**
 * @module An engine-like KV-event stream for the events benchmark: one vLLM worker whose steps store blocks the way
 * a scheduler does (1-block decode stores and 8–64-block prefill chunks, chained to running requests) and evict
 * the way vLLM's block pool does (one BlockRemoved per block, oldest finished request first, tail first) once the
 * cache is full. The cycle ends empty, so it can be replayed into one index again and again. Token ids are drawn
 * from the captured Qwen3 prompt so their msgpack widths are real ones.
 */
import { readFileSync } from "node:fs";
import { seededRandom } from "../src/core/seeded-random.ts";
import { EventBatchWriter } from "../src/core/event-encoder.ts";
import { BASE_SEED } from "../src/core/hash-seeds.ts";
import { encodeKvEventBatch, type KvEventEncoding } from "../src/sim/kv-event-codec.ts";
import { blockRemoved, blockStored, type KvCacheEvent } from "../src/sim/kv-events.ts";

export interface WorkloadOptions {
  seed: number;
  /** Blocks stored per engine step (batch) once warm; as many are evicted. */
  blocksPerBatch: number;
  /** Blocks the engine's cache holds before it evicts. */
  capacityBlocks: number;
  /** Engine steps before the final drain. */
  batches: number;
  blockSize: number;
}

export interface WorkloadStats {
  batches: number;
  storedEvents: number;
  storedBlocks: number;
  removedEvents: number;
  removedBlocks: number;
  events: number;
  blockOps: number;
  msgpackBytes: Record<KvEventEncoding, number>;
  binaryBytes: number;
}

export interface Workload {
  batches: KvCacheEvent[][];
  stats: WorkloadStats;
  payloads: Record<KvEventEncoding, Uint8Array[]>;
  /** The same batches pre-encoded by the core's EventBatchWriter for `slot`: what the decoder must produce, byte for byte. */
  binary(slot: number): Uint8Array[];
}

interface Sequence {
  hashes: bigint[];
}

function tokenPool(): number[] {
  const text = readFileSync(new URL("../test/fixtures/kv-events/kv_event_base.json", import.meta.url), "utf8");
  return (JSON.parse(text) as { token_ids: number[] }).token_ids;
}

export function buildWorkload(o: WorkloadOptions): Workload {
  const r = seededRandom(o.seed);
  const pool = tokenPool();
  const open: Sequence[] = [];
  const closed: Sequence[] = [];
  let live = 0;
  const batches: KvCacheEvent[][] = [];
  const s = { storedEvents: 0, storedBlocks: 0, removedEvents: 0, removedBlocks: 0 };

  const evictOne = (out: KvCacheEvent[]): void => {
    if (closed.length === 0) closed.push(open.shift()!);
    const seq = closed[0]!;
    out.push(blockRemoved([seq.hashes.pop()!]));
    if (seq.hashes.length === 0) closed.shift();
    live--;
    s.removedEvents++;
    s.removedBlocks++;
  };

  for (let b = 0; b < o.batches; b++) {
    const events: KvCacheEvent[] = [];
    for (let left = o.blocksPerBatch; left > 0;) {
      let seq: Sequence;
      if (open.length < 16 || r.next() < 0.3) open.push((seq = { hashes: [] }));
      else seq = open[r.int(open.length)]!;
      const n = Math.min(left, r.next() < 0.5 ? 1 : 8 + r.int(57));
      const hashes = Array.from({ length: n }, () => r.u64());
      const tokens = Array.from({ length: n * o.blockSize }, () => pool[r.int(pool.length)]!);
      events.push(blockStored(seq.hashes.at(-1) ?? null, hashes, tokens, o.blockSize));
      seq.hashes.push(...hashes);
      if (r.next() < 0.2 || seq.hashes.length >= 256) closed.push(...open.splice(open.indexOf(seq), 1));
      left -= n;
      live += n;
      s.storedEvents++;
      s.storedBlocks += n;
    }
    while (live > o.capacityBlocks) evictOne(events);
    batches.push(events);
  }
  closed.push(...open.splice(0));
  while (live > 0) {
    const events: KvCacheEvent[] = [];
    for (let k = 0; k < o.blocksPerBatch && live > 0; k++) evictOne(events);
    batches.push(events);
  }

  const encode = (form: KvEventEncoding): Uint8Array[] =>
    batches.map((events, i) => encodeKvEventBatch({ ts: 1_700_000_000 + i / 64, events, data_parallel_rank: 0 }, form));
  const payloads = { array: encode("array"), map: encode("map") };
  const binary = (slot: number): Uint8Array[] => batches.map((events) => {
    const w = new EventBatchWriter(1 << 16);
    // A run of Removed events is one record (the decoder merges them the same way).
    let run: bigint[] = [];
    for (const e of events) {
      if (e.type === "BlockRemoved") { run.push(...e.block_hashes); continue; }
      if (run.length > 0) { w.removed(slot, run); run = []; }
      if (e.type === "BlockStored") w.storedTokens(slot, e.parent_block_hash, e.block_hashes, e.token_ids, e.block_size, BASE_SEED);
    }
    if (run.length > 0) w.removed(slot, run);
    return w.bytes().slice();
  });
  const sum = (xs: Uint8Array[]): number => xs.reduce((a, x) => a + x.length, 0);
  const stats: WorkloadStats = {
    batches: batches.length, ...s, events: s.storedEvents + s.removedEvents, blockOps: s.storedBlocks + s.removedBlocks,
    msgpackBytes: { array: sum(payloads.array), map: sum(payloads.map) }, binaryBytes: sum(binary(0)),
  };
  return { batches, stats, payloads, binary };
}
