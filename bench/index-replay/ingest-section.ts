/** @module Section 3 of the index bench: event block-ops/s into WASM, binary batches against the per-event TS layer. */
import { describe, fmtRate, fmtRatio, measureInterleaved } from "../harness.ts";
import { eventBlocks } from "../trace-events.ts";
import type { Run } from "./args.ts";
import { applyBatches, applyEventsApi, chunkStored, encodeBatches } from "./replay-ops.ts";
import type { ReplayFixture, ReplayThroughput } from "./replay-sections.ts";

export interface EventIngestion {
  /** The per-event TS layer's time over the big batches' (above 1: batches are faster). */
  batchVsApi: number;
  /** The reference's event block-ops/s during the instrumented replay of section 1. */
  refEventRate: number;
}

/** Section 3: the replay's events alone, through pre-encoded batches and through stored/removed per event. */
export function eventIngestion(run: Run, fx: ReplayFixture, tp: ReplayThroughput): EventIngestion {
  const { S, results, m, log } = run;
  const { replay, idx, names: workerNames, slots } = fx;
  const { smallCap, small, perReq, split } = tp;
  const cycleBlocks = replay.stats.storedBlocks + replay.stats.removedBlocks;
  log();
  log(`3. event ingestion, WASM: the replay's events alone (${replay.events.length} events, ${cycleBlocks} block ops per cycle; per block op)`);
  const bigBatches = encodeBatches(replay.events, slots, 256 * 1024);
  const reqBatches = perReq.batches.filter((b): b is Uint8Array => b !== null);
  const chunked = chunkStored(replay.events, 16);
  const chunkedBatches = encodeBatches(chunked, slots, 256 * 1024);
  // Interleaved sample by sample: the WASM ÷ TS-layer ratio is read from one stretch of the machine's time (measured one
  // after another, a slowdown between two items moved it between 1.2× and 1.8× in runs of the same code).
  const batches = (index: typeof idx, list: readonly Uint8Array[]) => (n: number): number => {
    let a = 0; for (let i = 0; i < n; i++) a += applyBatches(index, list); return a;
  };
  const perEvent = (events: typeof chunked) => (n: number): number => {
    let a = 0; for (let i = 0; i < n; i++) a += applyEventsApi(idx, events, workerNames); return a;
  };
  const rows = [
    { key: "evBatchBig", name: `(a) applyBatch, ${bigBatches.length} batches ≤ 256 KiB, pre-encoded`, fn: batches(idx, bigBatches) },
    { key: "evBatchReq", name: `(a) applyBatch, one batch per request (${reqBatches.length}), pre-encoded`, fn: batches(idx, reqBatches) },
    { key: "evApi", name: "(b) TS layer: stored / removed per event", fn: perEvent(replay.events) },
    { key: "evBatchChunked", name: `(a) applyBatch, Stored cut to ≤ 16 blocks/event (${chunked.length} events)`, fn: batches(idx, chunkedBatches) },
    { key: "evApiChunked", name: "(b) TS layer, Stored cut to ≤ 16 blocks/event", fn: perEvent(chunked) },
    // Sensitivity: the same batches into an index whose capacity is sized to the replay (2× its peak entries, a power
    // of two) instead of the default 2^20: the tables shrink from ~100 MiB to a few MiB, so fewer cache/TLB misses.
    { key: "evBatchBigSmallCap", name: `(a) applyBatch ≤ 256 KiB, capacity 2^${Math.log2(smallCap)} instead of 2^${Math.log2(idx.options.capacity)}`, fn: batches(small, bigBatches) },
    { key: "evBatchChunkedSmallCap", name: `(a) applyBatch, Stored ≤ 16 blocks, capacity 2^${Math.log2(smallCap)}`, fn: batches(small, chunkedBatches) },
  ];
  const measured = measureInterleaved(rows.map((r) => ({ ...r, opts: { opsPerIter: cycleBlocks } })), S);
  rows.forEach((r, i) => {
    const x = (m[r.key] = measured[i]!);
    log(`  ${describe(x, "blk")}  ${fmtRate(x.opsPerSec, "block-ops/s")}`);
  });
  const refEventRate = split.reference.eventBlocks / (split.reference.eventsMs / 1e3);
  log(`  vs the TS reference's ${fmtRate(refEventRate, "block-ops/s")} (its event calls during the instrumented replay): ` +
    `(a) ${fmtRatio(m.evBatchBig.opsPerSec / refEventRate)}, (b) ${fmtRatio(m.evApi.opsPerSec / refEventRate)}`);
  const storedSizes = replay.events.filter((e) => e.kind === "stored").map(eventBlocks).sort((x, y) => x - y);
  const batchVsApi = m.evApi.medianNs / m.evBatchBig.medianNs;
  const fasterPath = batchVsApi >= 1 ? "binary batches decoded in WASM" : "TS layer per event";
  log(`  faster path: ${fasterPath} (${fmtRatio(Math.max(batchVsApi, 1 / batchVsApi))}); Stored events hold ${storedSizes[0]}…${storedSizes[storedSizes.length - 1]} blocks ` +
    `(median ${storedSizes[storedSizes.length >> 1]}); cutting them to ≤ 16 blocks changes (a) by ${fmtRatio(m.evBatchBig.medianNs / m.evBatchChunked.medianNs)} in speed`);
  log(`  index capacity 2^${Math.log2(idx.options.capacity)} → 2^${Math.log2(smallCap)}: (a) ${fmtRatio(m.evBatchBig.medianNs / m.evBatchBigSmallCap.medianNs)} faster; ` +
    `both changes together: ${fmtRatio(m.evBatchBig.medianNs / m.evBatchChunkedSmallCap.medianNs)} (${fmtRate(m.evBatchChunkedSmallCap.opsPerSec, "block-ops/s")})`);
  results.eventIngestion = {
    blockOpsPerCycle: cycleBlocks, smallCapacity: smallCap, bigBatches: bigBatches.length, perRequestBatches: reqBatches.length, fasterPath, batchOverApi: batchVsApi,
    storedEventBlocks: { min: storedSizes[0], median: storedSizes[storedSizes.length >> 1], max: storedSizes[storedSizes.length - 1] },
  };
  return { batchVsApi, refEventRate };
}
