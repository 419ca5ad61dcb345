/** @module Sections 1 and 2 of the index bench: the trace replay into the WASM index and the TS reference, and find_matches latency. */
import { KvIndex } from "../../src/core/kv-index.ts";
import { ReferenceIndex } from "../../src/reference/index-reference.ts";
import { buildReplay, type Replay } from "../trace-events.ts";
import { describe, fmtRate, fmtRatio, measure, now } from "../harness.ts";
import * as hooks from "../../test/support/kv-index-hooks.ts";
import type { Args, Run } from "./args.ts";
import {
  encodePerRequest, replayReference, replayWasm, replayWasmBatched, splitPass, verifyReference, verifyWasm, type SplitTimes,
} from "./replay-ops.ts";

const workerName = (w: number): string => `w${w}`;

/** The replay both indexes run, the WASM index it was verified on, and the reference's (possibly shorter) replay. */
export interface ReplayFixture {
  replay: Replay;
  idx: KvIndex;
  names: string[];
  slots: number[];
  refReplay: Replay;
  /** Whether the reference runs only a prefix of the trace (`--ref-limit`, `--quick`). */
  refSub: boolean;
  ref: ReferenceIndex;
}

export interface ReplayThroughput {
  replayRatio: number;
  replayRatioMin: number;
  /** The capacity of the index sized to the replay (sensitivity rows), and that index. */
  smallCap: number;
  small: KvIndex;
  perReq: ReturnType<typeof encodePerRequest>;
  split: { wasm: SplitTimes; reference: SplitTimes };
}

/** A prefix of the replay that still drains: the first `n` requests plus Removed for whatever they left cached. */
function subReplay(args: Args, n: number): Replay {
  return buildReplay({ trace: args.trace, workers: args.workers, capacity: args.capacity, split: args.split, limit: n });
}

/** Builds the replay from the trace, prints what it holds, and checks both indexes against the simulator once. */
export function replayFixture(run: Run): ReplayFixture {
  const { args, module, results, log } = run;
  let t = now();
  const replay = buildReplay({ trace: args.trace, workers: args.workers, capacity: args.capacity, split: args.split, limit: args.limit });
  const st = replay.stats;
  const matchOps = replay.ops.length - replay.events.length;
  log(`kvgate index benchmark — ${new Date().toISOString()}`);
  log(`trace: ${replay.trace}${args.trace ? "" : " (Mooncake FAST'25 synthetic trace, kvcache-ai/Mooncake, Apache-2.0)"}`);
  log(`replay built in ${(now() - t).toFixed(0)} ms: ${st.requests} requests → ${st.workers} workers × LRU ${st.capacityPerWorker} blocks of ${st.tokensPerBlock} tokens ` +
    `(${st.split} per 512-token trace block); policy: min(prefill blocks + decayed recent load), ties → lowest worker`);
  log(`  ${replay.ops.length} ops per cycle = ${matchOps} find_matches (${st.promptBlocks} blocks queried) + ${st.storedEvents} Stored (${st.storedBlocks} blocks) + ` +
    `${st.removedEvents} Removed (${st.removedBlocks} blocks, of which the final drain ${st.drainEvents} events / ${st.drainBlocks} blocks)`);
  log(`  fleet prefix hit ratio ${(st.hitRatio * 100).toFixed(1)}%, peak index entries ${st.maxIndexEntries}, requests per worker ${Math.min(...st.perWorker)}…${Math.max(...st.perWorker)}`);
  results.replay = { trace: replay.trace, ...st };

  const idx = new KvIndex(module);
  const names = Array.from({ length: args.workers }, (_, w) => workerName(w));
  const slots = names.map((n) => idx.slotFor(n, 0));
  const vw = verifyWasm(idx, replay, names);
  log(`  verification (WASM find_matches vs simulator, all events applied, empty after drain): ${vw.length === 0 ? "ok" : "FAILED"}`);
  for (const e of vw) log(`    ${e}`);

  const refReplay = args.refLimit && args.refLimit < st.requests ? subReplay(args, args.refLimit) : replay;
  const refSub = refReplay !== replay;
  const newRef = (): ReferenceIndex => {
    const r = new ReferenceIndex(idx.options.capacity);
    for (const s of slots) r.openSlot(s);
    return r;
  };
  const ref = newRef();
  t = now();
  const vr = verifyReference(ref, refReplay.ops, slots);
  const refPassMs = now() - t;
  log(`  verification (reference vs simulator${refSub ? `, first ${refReplay.stats.requests} requests` : ""}): ${vr.length === 0 ? "ok" : "FAILED"} (one pass ${refPassMs.toFixed(0)} ms)`);
  for (const e of vr) log(`    ${e}`);
  results.verification = { wasm: vw, reference: vr };
  return { replay, idx, names, slots, refReplay, refSub, ref };
}

/** Section 1: replay ops/s of the WASM index (default and replay-sized capacity, API and batched events) and the reference. */
export function replayThroughput(run: Run, fx: ReplayFixture): ReplayThroughput {
  const { module, S, results, m, log } = run;
  const { replay, idx, names, slots, refReplay, refSub, ref } = fx;
  const st = replay.stats;

  log();
  log("1. replay throughput (events + find_matches, same op stream; per op)");
  // The reference is slow (BigInt XXH3 per stored block): one pass per sample, few samples, bounded time.
  const refOps = refReplay.ops.length;
  m.refReplay = measure(`TS reference, replay${refSub ? ` (first ${refReplay.stats.requests} requests)` : ""}`,
    (n) => { let a = 0; for (let i = 0; i < n; i++) a += replayReference(ref, refReplay.ops, slots); return a; },
    { opsPerIter: refOps, iters: 1, warmup: 1, samples: Math.max(3, Math.min(S, 5)), budgetMs: 25_000 });
  log("  " + describe(m.refReplay));
  const wasmSameStream = refSub
    ? measure(`WASM KvIndex API, replay (first ${refReplay.stats.requests} requests)`,
      (n) => { let a = 0; for (let i = 0; i < n; i++) a += replayWasm(idx, refReplay.ops, names); return a; },
      { opsPerIter: refOps, samples: S })
    : undefined;
  m.wasmReplay = measure("WASM KvIndex API (findMatchesByHashes, stored, removed), replay",
    (n) => { let a = 0; for (let i = 0; i < n; i++) a += replayWasm(idx, replay.ops, names); return a; },
    { opsPerIter: replay.ops.length, samples: S });
  if (wasmSameStream) {
    m.wasmReplaySub = wasmSameStream;
    log("  " + describe(wasmSameStream));
  }
  log("  " + describe(m.wasmReplay));
  const perReq = encodePerRequest(replay, slots);
  m.wasmReplayBatched = measure("WASM, find_matches via API + per-request binary event batch",
    (n) => { let a = 0; for (let i = 0; i < n; i++) a += replayWasmBatched(idx, perReq.matches, perReq.batches); return a; },
    { opsPerIter: replay.ops.length, samples: S });
  log("  " + describe(m.wasmReplayBatched));
  // Sensitivity: an index whose capacity is sized to the replay (2× its peak entries, a power of two) instead of the
  // default 2^20: its tables shrink from ~100 MiB to a few MiB, so probes miss the caches and TLB less often.
  const smallCap = Math.max(1 << 12, 2 ** Math.ceil(Math.log2(2 * st.maxIndexEntries)));
  const small = new KvIndex(module, { capacity: smallCap });
  const smallSlots = names.map((n) => small.slotFor(n, 0));
  if (smallSlots.some((x, i) => x !== slots[i])) throw new Error("slot numbering differs between indexes");
  m.wasmReplaySmallCap = measure(`WASM KvIndex API, replay, capacity 2^${Math.log2(smallCap)} instead of 2^${Math.log2(idx.options.capacity)}`,
    (n) => { let a = 0; for (let i = 0; i < n; i++) a += replayWasm(small, replay.ops, names); return a; },
    { opsPerIter: replay.ops.length, samples: S });
  log("  " + describe(m.wasmReplaySmallCap));
  const wasmForRatio = wasmSameStream ?? m.wasmReplay;
  const replayRatio = m.refReplay.medianNs / wasmForRatio.medianNs;
  const replayRatioMin = m.refReplay.minNs / wasmForRatio.minNs;
  log(`  WASM ${fmtRate(wasmForRatio.opsPerSec)}, reference ${fmtRate(m.refReplay.opsPerSec)} → WASM/reference ${fmtRatio(replayRatio)} at the median (${fmtRatio(replayRatioMin)} min/min)` +
    (refSub ? `, both on the first ${refReplay.stats.requests} requests` : ""));
  log(`  capacity 2^${Math.log2(smallCap)}: ${fmtRate(m.wasmReplaySmallCap.opsPerSec)} = ${fmtRatio(m.wasmReplay.medianNs / m.wasmReplaySmallCap.medianNs)} the default-capacity index`);
  log(`  batched-event variant: ${fmtRate(m.wasmReplayBatched.opsPerSec)} = ${fmtRatio(m.refReplay.medianNs / m.wasmReplayBatched.medianNs)} the reference` +
    (refSub ? " (full trace vs reference subsample: indicative)" : ""));

  // Where each implementation's replay time goes: time inside find_matches calls vs inside event calls, measured
  // around every call of a replay pass (timer cost ~50 ns per call, <1% of either side); the fastest pass counts.
  const split = {
    wasm: splitPass(refReplay.ops, 3, (op) => hooks.findMatchesByHashes(idx, op.seq).matches.length,
      (op) => (op.kind === "stored" ? hooks.stored(idx, names[op.worker]!, 0, op.parent, op.blocks).length : hooks.removed(idx, names[op.worker]!, 0, op.hashes))),
    reference: splitPass(refReplay.ops, 2, (op) => ref.findMatches(op.seq).size,
      (op) => (op.kind === "stored" ? ref.store(slots[op.worker]!, op.parent, op.blocks).length : ref.remove(slots[op.worker]!, op.hashes))),
  };
  log(`  time split of one replay pass${refSub ? ` (first ${refReplay.stats.requests} requests)` : ""}: ` +
    `find_matches WASM ${split.wasm.matchMs.toFixed(1)} ms vs reference ${split.reference.matchMs.toFixed(1)} ms (${fmtRatio(split.reference.matchMs / split.wasm.matchMs)}), ` +
    `events WASM ${split.wasm.eventsMs.toFixed(1)} ms vs reference ${split.reference.eventsMs.toFixed(1)} ms (${fmtRatio(split.reference.eventsMs / split.wasm.eventsMs)})`);
  results.replaySplit = split;
  return { replayRatio, replayRatioMin, smallCap, small, perReq, split };
}
