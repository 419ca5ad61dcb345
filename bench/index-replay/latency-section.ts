/**
 * @module Section 2 of the index bench: find_matches latency while the replay runs, on the allocation-free hot path
 * (sequence words in, pairs read in place, events as binary batches) and on the object form the bench timed before.
 */
import { consume, fmtNs, now, percentile } from "../harness.ts";
import * as hooks from "../../test/support/kv-index-hooks.ts";
import { KvIndex } from "../../src/core/kv-index.ts";
import type { Run } from "./args.ts";
import type { ReplayFixture, ReplayThroughput } from "./replay-sections.ts";

export interface LatencyRow {
  samples: number;
  p50Ns: number;
  p90Ns: number;
  p99Ns: number;
  p999Ns: number;
  maxNs: number;
  p50NsPerBlock: number;
}

export interface FindMatchesLatency extends LatencyRow {
  meanQueryBlocks: number;
  timerFloorNs: number;
  /** The same replay on the index sized to the fleet (hot path). */
  fleetSized: LatencyRow;
  /** The baseline of the jump: the same as fleetSized on a fresh index that probes every block (matchJump 1). */
  fleetSizedEveryBlock: LatencyRow & { matchJump: number; jumpedMatchJump: number };
  /** findMatchesByHashes (BigInt copy in, BlockMatch objects out) with per-event stored/removed: the earlier figure. */
  objectForm: LatencyRow;
}

function row(lat: Float64Array, blocks: Float64Array): LatencyRow {
  const sorted = Float64Array.from(lat).sort();
  return {
    samples: lat.length, p50Ns: percentile(sorted, 50, true), p90Ns: percentile(sorted, 90, true), p99Ns: percentile(sorted, 99, true),
    p999Ns: percentile(sorted, 99.9, true), maxNs: sorted[sorted.length - 1]!, p50NsPerBlock: percentile(lat.map((x, i) => x / Math.max(1, blocks[i]!)), 50),
  };
}

const fmtRow = (r: LatencyRow): string =>
  `p50 ${fmtNs(r.p50Ns)}, p90 ${fmtNs(r.p90Ns)}, p99 ${fmtNs(r.p99Ns)}, p99.9 ${fmtNs(r.p999Ns)}, max ${fmtNs(r.maxNs)}; p50 per query block ${fmtNs(r.p50NsPerBlock)}`;

/** Hot path: request r's match timed, then the events it caused applied as one binary batch (as an engine feed does). */
function hotPath(idx: KvIndex, words: (Uint32Array | undefined)[], batches: readonly (Uint8Array | null)[], cycles: number): LatencyRow {
  let count = 0;
  for (const w of words) if (w) count++;
  const lat = new Float64Array(count * (cycles - 1)), blocks = new Float64Array(lat.length);
  let li = 0;
  for (let c = 0; c < cycles; c++) {
    for (let r = 0; r < batches.length; r++) {
      const w = words[r];
      if (w) {
        const t0 = now();
        const k = idx.matchSequenceWords(w);
        let a = 0;
        for (let j = 0; j < k; j++) a += idx.matches.depth(j);
        const dt = now() - t0;
        consume(a);
        if (c > 0) {
          blocks[li] = w.length >>> 1;
          lat[li++] = dt * 1e6;
        }
      }
      const b = batches[r];
      if (b) idx.applyBatch(b);
    }
  }
  return row(lat, blocks);
}

/** The earlier measurement: BigInt hashes copied in, BlockMatch objects out, events through the per-event TS layer. */
function objectForm(run: Run, fx: ReplayFixture, cycles: number): LatencyRow {
  const { replay, idx, names } = fx;
  const matchOps = replay.ops.length - replay.events.length;
  const lat = new Float64Array(matchOps * (cycles - 1)), blocks = new Float64Array(lat.length);
  let li = 0;
  for (let c = 0; c < cycles; c++) {
    for (const op of replay.ops) {
      if (op.kind === "match") {
        const t0 = now();
        const r = hooks.findMatchesByHashes(idx, op.seq);
        const dt = now() - t0;
        consume(r.matches.length);
        if (c > 0) {
          blocks[li] = op.seq.length;
          lat[li++] = dt * 1e6;
        }
      } else if (op.kind === "stored") hooks.stored(idx, names[op.worker]!, 0, op.parent, op.blocks);
      else hooks.removed(idx, names[op.worker]!, 0, op.hashes);
    }
  }
  return row(lat, blocks);
}

/** Section 2: find_matches latency (WASM) while the replay runs. */
export function findMatchesLatency(run: Run, fx: ReplayFixture, tp: ReplayThroughput): FindMatchesLatency {
  const { args, results, log } = run;
  const { idx, small, perReq } = { ...fx, ...tp };
  const cycles = args.quick ? 2 : 4;
  const words = perReq.batches.map((_, r) => (perReq.matches[r] ? hooks.sequenceWords(perReq.matches[r]!.seq) : undefined));
  log();
  log(`2. find_matches latency during the replay (WASM; ${cycles - 1} cycles after one warm-up)`);
  const hot = hotPath(idx, words, perReq.batches, cycles);
  let queried = 0;
  for (const w of words) if (w) queried += w.length >>> 1;
  const meanQueryBlocks = queried / Math.max(1, words.filter(Boolean).length);
  log(`  hot path (matchSequenceWords + pairs read in place; events as one binary batch per request), capacity 2^${Math.log2(idx.options.capacity)}:`);
  log(`    ${hot.samples} calls, mean query ${meanQueryBlocks.toFixed(0)} blocks: ${fmtRow(hot)}`);
  const fleetSized = hotPath(small, words, perReq.batches, cycles);
  log(`  same, index sized to the fleet (capacity 2^${Math.log2(small.options.capacity)}, matchJump ${small.options.matchJump}): ${fmtRow(fleetSized)}`);
  // The jump's baseline in this run: a fresh index of the same size probing every block (its warm-up cycle fills it).
  const exact = new KvIndex(run.module, { capacity: small.options.capacity, matchJump: 1 });
  for (const n of fx.names) exact.slotFor(n, 0);
  const every = hotPath(exact, words, perReq.batches, cycles);
  log(`  same, every block probed (matchJump 1): ${fmtRow(every)}; jump/every p50 ${(fleetSized.p50Ns / every.p50Ns).toFixed(2)}, p99 ${(fleetSized.p99Ns / every.p99Ns).toFixed(2)}`);
  const obj = objectForm(run, fx, cycles);
  log(`  object form (findMatchesByHashes: BigInt copy in, BlockMatch objects out; events per call), as timed before: ${fmtRow(obj)}`);
  let emptyTimer = Infinity;
  for (let i = 0; i < 10_000; i++) {
    const t0 = now();
    emptyTimer = Math.min(emptyTimer, (now() - t0) * 1e6);
  }
  log(`  timer floor ${fmtNs(emptyTimer)}`);
  const fm: FindMatchesLatency = {
    ...hot, meanQueryBlocks, timerFloorNs: emptyTimer, fleetSized, objectForm: obj,
    fleetSizedEveryBlock: { ...every, matchJump: 1, jumpedMatchJump: small.options.matchJump },
  };
  results.findMatchesLatency = fm;
  return fm;
}
