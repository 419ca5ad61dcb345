/**
 * @module `npm run bench -- index`: acceptance item 3 of issue 2.
 *
 * 1. Replay of the Mooncake synthetic trace as KV events interleaved with find_matches (see trace-events.ts), the
 *    same operation stream into the WASM index (`KvIndex` through test/support/kv-index-hooks.ts) and the TS
 *    reference (`ReferenceIndex`): ops/s of each and their ratio.
 * 2. find_matches p50/p99 latency (WASM) during the replay.
 * 3. Event block-ops/s (stored + removed blocks per second) in WASM through two ingestion paths: binary batches
 *    decoded inside WASM (`applyBatch`), and a thin TS layer calling `stored`/`removed` per event.
 * 4. Per-request route cost for an 8k-token prompt (copy tokens + hash + match + read scores) at block sizes 16 and
 *    64 against an index of 64 slots and ~1M background blocks, divided by the cost of copying the same tokens into
 *    WASM memory; plus XXH64 via xxhash-wasm (per-block calls from JS) vs our one-call prompt hashing, for context.
 * 5. Approximate mode's write per request: recordRoute of a routed 8k-token prompt whose blocks' TTLs it refreshes,
 *    against the route of the same prompts.
 *
 * One function per section (bench/index-replay/): replay-sections.ts (1), latency-section.ts (2), ingest-section.ts (3), route-section.ts
 * (4), record-section.ts (5), summary.ts (the closing table); this file runs them in order and writes the JSON.
 *
 * Every figure comes from this process and is printed next to a baseline measured in the same run; nothing is
 * asserted (the machine is shared and noisy); the process exits 0 whether or not targets hold.
 *
 * Flags: --trace PATH, --workers N (16), --capacity C blocks per worker (4096), --split S engine blocks per 512-token
 * trace block (8 → 64-token blocks), --limit N requests, --ref-limit N requests for the reference (default: all),
 * --samples N, --quick (fewer samples, reference on 1,000 requests).
 */
import { loadavg } from "node:os";
import { loadCoreModule } from "../src/wasm/module-fs.ts";
import { now, sinkValue, writeResults } from "./harness.ts";
import { parseArgs, type Measurements, type Run } from "./index-replay/args.ts";
import { replayFixture, replayThroughput } from "./index-replay/replay-sections.ts";
import { findMatchesLatency } from "./index-replay/latency-section.ts";
import { eventIngestion } from "./index-replay/ingest-section.ts";
import { routeCost } from "./index-replay/route-section.ts";
import { recordCost } from "./index-replay/record-section.ts";
import { summarize } from "./index-replay/summary.ts";

export async function main(argv: string[]): Promise<void> {
  const args = parseArgs(argv);
  const started = now();
  const load0 = loadavg().map((x) => x.toFixed(2)).join(" ");
  const m = {} as Measurements;
  const results: Record<string, unknown> = { args };
  const run: Run = { args, module: await loadCoreModule(), S: args.samples, results, m, log: (s = "") => console.log(s) };

  const fx = replayFixture(run);
  const tp = replayThroughput(run, fx);
  const fm = findMatchesLatency(run, fx, tp);
  const ing = eventIngestion(run, fx, tp);
  const routeRes = await routeCost(run);
  recordCost(run);
  const summary = summarize(run, load0, fx, tp, fm, ing, routeRes);

  const { replayRatio, replayRatioMin } = tp, { refEventRate } = ing, { refSub, refReplay } = fx;
  const r16 = routeRes.bs16!, r64 = routeRes.bs64!;
  const log = run.log;
  const file = writeResults("index", {
    ...results,
    measurements: m,
    summary: Object.fromEntries(summary.map(([k, v, tgt, s]) => [k!, { value: v, target: tgt, status: s }])),
    ratios: {
      wasmOverReference: replayRatio, wasmOverReferenceMin: replayRatioMin,
      eventBlockOpsPerSec: { reference: refEventRate, batch: m.evBatchBig.opsPerSec, batchPerRequest: m.evBatchReq.opsPerSec, api: m.evApi.opsPerSec, batchChunked16: m.evBatchChunked.opsPerSec, apiChunked16: m.evApiChunked.opsPerSec },
      routeOverCopy: { bs16: r16.typicalOverCopy, bs64: r64.typicalOverCopy, bs16Cold: r16.coldOverCopy, bs64Cold: r64.coldOverCopy },
    },
    referenceSubsampled: refSub ? refReplay.stats.requests : false,
    loadAverage: { start: load0, end: loadavg() },
    sink: sinkValue(),
    wallMs: now() - started,
  });
  log(`\nwrote ${file} (wall ${((now() - started) / 1000).toFixed(1)} s, sink ${sinkValue()})`);
}

