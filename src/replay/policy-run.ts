/**
 * @module Replays one arrival schedule against one policy on a fresh fleet: starts the simulated engines, a router
 * configured for the policy behind an HTTP front, sends every request over HTTP as a streaming completion at its
 * time, samples per-worker load, and tears everything down. Every policy gets the same seed, capacity and schedule.
 */
import { createKvIndex } from "../core/create-kv-index.ts";
import { Router, createPrng } from "../routing/index.ts";
import type { SimEngineOptions } from "../sim/sim-options.ts";
import { sendCompletion, type CompletionRecord } from "./completion-client.ts";
import { engineClock } from "./engine-clock.ts";
import { KvEventApplier, type ApplierStats } from "./kv-event-applier.ts";
import { LoadSampler, type LoadSample } from "./load-sampler.ts";
import type { ReplayHost } from "./replay-host.ts";
import { POLICY_WIRING, type ReplayPolicy } from "./replay-policies.ts";
import type { ReplayRequest } from "./replay-request.ts";
import { createRouterFront } from "./router-front.ts";
import { runSchedule, type ScheduleReport } from "./schedule.ts";
import { promptTokens } from "./synthetic-tokens.ts";

export interface FleetConfig {
  workers: number;
  model: string;
  /** Engine options shared by every worker (capacity, block size, batching, context length). */
  engine: Required<Pick<SimEngineOptions, "numGpuBlocks" | "blockSize" | "maxNumBatchedTokens" | "maxNumSeqs" | "maxModelLen">>;
}

export interface PolicyRunInput {
  policy: ReplayPolicy;
  requests: readonly ReplayRequest[];
  fleet: FleetConfig;
  /** Trace ms per engine ms: arrivals come this many times faster than in the trace. */
  traceSpeedup: number;
  /** Engine ms per wall ms (the engines' speedupRatio). */
  engineSpeedup: number;
  seed: number;
  /** Engine ms between load samples. */
  sampleEveryMs: number;
  host: ReplayHost;
  onProgress?(p: { sent: number; done: number; errors: number; total: number }): void;
}

export interface PolicyRun {
  policy: ReplayPolicy;
  workers: string[];
  records: CompletionRecord[];
  /** Every inter-token gap in engine ms (for ITL percentiles). */
  gaps: Float64Array;
  load: LoadSample[];
  schedule: ScheduleReport;
  /** Cached tokens the router predicted at routing time / prompt tokens routed. */
  predictedHitRate: number;
  events?: ApplierStats;
}

const TICK_MS = 1_000;

export async function runPolicy(input: PolicyRunInput): Promise<PolicyRun> {
  const { policy, fleet, host } = input;
  const wiring = POLICY_WIRING[policy];
  const clock = engineClock(host.wall, input.engineSpeedup);
  const index = await createKvIndex({
    maxSlots: Math.max(64, fleet.workers), capacity: Math.min(1 << 26, Math.max(1 << 20, 2 * fleet.workers * fleet.engine.numGpuBlocks)),
  });
  const applier = wiring.applyEvents ? new KvEventApplier(index) : undefined;
  let predicted = 0, routedTokens = 0;
  const router = new Router({
    index, now: clock.now, random: createPrng(input.seed),
    observer: { routed: (s) => ((predicted += s.cachedTokens), (routedTokens += s.requestTokens)) },
  }, { policy: wiring.routing, queueThreshold: null, seed: input.seed });
  const servers: { close(): Promise<void> }[] = [];
  const workers = Array.from({ length: fleet.workers }, (_, i) => `w${i}`);
  try {
    const sims = await host.startFleet({
      engines: workers.map((workerId) => ({ ...fleet.engine, model: fleet.model, workerId, speedupRatio: input.engineSpeedup })),
      onBatch: applier ? (b) => applier.apply(b) : undefined,
    });
    servers.push(sims);
    workers.forEach((id, i) => router.addWorker({
      id, endpoint: sims.urls[i]!, models: [fleet.model], blockSize: fleet.engine.blockSize, totalKvBlocks: fleet.engine.numGpuBlocks,
      maxBatchedTokens: fleet.engine.maxNumBatchedTokens, kvEvents: wiring.kvEvents,
    }));
    const front = await host.serve(createRouterFront({ router, fetch: host.fetch }));
    servers.push(front);
    const runStart = clock.now();
    const sampler = new LoadSampler(sims.urls, { fetch: host.fetch, clock, intervalMs: input.sampleEveryMs, runStart });
    sampler.start();
    let ticking = true;
    // Housekeeping the gateway would schedule: approximate-mode TTLs and stale bookings.
    const ticker = (async () => {
      while (ticking) {
        await clock.sleep(TICK_MS);
        router.tick();
      }
    })();
    const records: CompletionRecord[] = [];
    const gaps: number[] = [];
    const pending: Promise<void>[] = [];
    let errors = 0;
    const total = input.requests.length;
    const progress = (): void => input.onProgress?.({ sent: pending.length, done: records.length, errors, total });
    const schedule = await runSchedule(input.requests, {
      divisor: input.traceSpeedup, clock,
      send: (req) => {
        pending.push(sendCompletion({
          url: front.url, model: fleet.model, index: req.index, requestId: `${policy}-${req.index}`, tokens: promptTokens(req),
          maxTokens: Math.max(1, req.outputLength), now: clock.now, runStart, fetch: host.fetch, onGap: (g) => gaps.push(g),
        }).then((rec) => {
          records.push(rec);
          if (rec.error) errors++;
          progress();
        }));
        progress();
      },
    });
    await Promise.all(pending);
    ticking = false;
    const load = await sampler.stop();
    await ticker;
    records.sort((a, b) => a.sentAt - b.sentAt || a.index - b.index);
    return {
      policy, workers, records, gaps: Float64Array.from(gaps), load, schedule,
      predictedHitRate: routedTokens ? predicted / routedTokens : 0, events: applier?.stats,
    };
  } finally {
    await Promise.all(servers.map((s) => s.close()));
  }
}
