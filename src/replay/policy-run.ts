/**
 * @module Replays one arrival schedule against one policy on a fresh fleet: starts the simulated engines and a
 * kvgate gateway (createGateway) configured for the policy, serves it over HTTP, sends every request to it as a
 * streaming completion at its time, feeds the engines' KV events to its ingest (kv with events only), samples
 * per-worker load, and tears everything down. Every policy gets the same seed, capacity and schedule.
 */
import { defaultConfig, type GatewayConfig } from "../gateway/config.ts";
import { createGateway, type Gateway } from "../gateway/gateway.ts";
import { DEFAULT_INDEX_CAPACITY } from "../gateway/index-sizing.ts";
import type { EncodedKvBatch } from "../sim/kv-event-sink.ts";
import { REFERENCE_OVERLAP_WEIGHT } from "../routing/router-config.ts";
import type { SimEngineOptions } from "../sim/sim-options.ts";
import { sendCompletion, type CompletionRecord } from "./completion-client.ts";
import { LoadSampler, type LoadSample } from "./load-sampler.ts";
import type { ReplayHost } from "./replay-host.ts";
import { POLICY_WIRING, type ReplayPolicy } from "./replay-policies.ts";
import type { KvTuning } from "./replay-args.ts";
import { engineBlocks, FaultSchedule, type ReplayFault } from "./replay-faults.ts";
import type { ReplayRequest } from "./replay-request.ts";
import { runRequests } from "./request-run.ts";
import { engineClock, type ScheduleReport } from "./schedule.ts";
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
  /** Overrides of kvgate's defaults for the kv policies (ablations). */
  kvTuning?: KvTuning;
  /** Engine ms between load samples. */
  sampleEveryMs: number;
  host: ReplayHost;
  /** Log this run's decisions here (needs host.decisionLog). */
  decisionLog?: { path: string; tokens: boolean };
  /** Injected into the fleet the same way for every policy (see replay-faults.ts). */
  faults?: readonly ReplayFault[];
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
  /** KV-event batches handed to the gateway's ingest, and what it made of them. */
  events?: EventStats;
  /** Gateway log lines (warnings), the first few. */
  log: string[];
}

export interface EventStats {
  batches: number;
  events: number;
  /** Batches the ingest refused or ignored, and batches its sequence numbers say were lost. */
  refused: number;
  gaps: number;
  /** Batches a lose_events fault kept from the gateway (not counted in `batches`). */
  dropped?: number;
}

/** The gateway as the replay runs it: the policy's routing and event mode, no router queue, engine-time clocks. */
export function replayGatewayConfig(input: Pick<PolicyRunInput, "policy" | "fleet" | "seed" | "kvTuning">, workers: readonly { id: string; url: string }[]): GatewayConfig {
  const { fleet } = input;
  const wiring = POLICY_WIRING[input.policy];
  const c = defaultConfig();
  c.port = 0;
  c.log = "warn";
  c.blockSize = fleet.engine.blockSize;
  c.workers = workers.map((w) => ({
    url: w.url, id: w.id, models: [fleet.model], blockSize: fleet.engine.blockSize, kvEvents: wiring.kvEvents,
    totalKvBlocks: fleet.engine.numGpuBlocks, maxBatchedTokens: fleet.engine.maxNumBatchedTokens,
  }));
  c.router = { ...c.router, policy: wiring.routing, queueThreshold: null, seed: input.seed, closedLoop: wiring.closedLoop, decodeAware: wiring.closedLoop,
    hotPrefixSpread: wiring.closedLoop };
  // The reference policies keep the reference's weight; kvgate's use kvgate's default.
  if (!wiring.closedLoop) Object.assign(c.router, { overlapWeight: REFERENCE_OVERLAP_WEIGHT, newPrefillFactor: 1, inflightCached: false });
  else if (input.kvTuning) Object.assign(c.router, input.kvTuning);
  c.index = {
    ...c.index,
    maxSlots: Math.max(c.index.maxSlots, fleet.workers),
    capacity: Math.min(1 << 26, Math.max(c.index.capacity ?? DEFAULT_INDEX_CAPACITY, 2 * fleet.workers * fleet.engine.numGpuBlocks)),
    maxPromptTokens: Math.max(c.index.maxPromptTokens, fleet.engine.maxModelLen),
  };
  c.maxBodyBytes = Math.max(c.maxBodyBytes, fleet.engine.maxModelLen * 12 + 4096);
  return c;
}

const TICK_MS = 1_000;

export async function runPolicy(input: PolicyRunInput): Promise<PolicyRun> {
  const { policy, fleet, host } = input;
  const wiring = POLICY_WIRING[policy];
  const clock = engineClock(host.wall, input.engineSpeedup);
  const servers: { close(): Promise<void> }[] = [];
  const workers = Array.from({ length: fleet.workers }, (_, i) => `w${i}`);
  const log: string[] = [];
  const events: EventStats | undefined = wiring.applyEvents ? { batches: 0, events: 0, refused: 0, gaps: 0 } : undefined;
  let gw: Gateway | undefined;
  // Workers whose KV events stopped reaching the gateway (lose_events).
  const muted = new Set<string>();
  const ingest = (b: EncodedKvBatch): void => {
    if (!gw || !events) return;
    if (muted.has(b.workerId)) {
      events.dropped = (events.dropped ?? 0) + 1;
      return;
    }
    events.batches++;
    try {
      const r = gw.state.ingest.ingest({ worker: b.workerId, dpRank: b.dpRank, seq: b.seq, bytes: b.bytes });
      events.events += r.events;
      events.gaps += r.gap;
      if (r.result !== "applied") events.refused++;
    } catch (e) {
      events.refused++;
      if (log.length < 20) log.push(`KV ingest: ${(e as Error).message}`);
    }
  };
  try {
    const sims = await host.startFleet({
      engines: workers.map((workerId, i) => ({
        ...fleet.engine, numGpuBlocks: engineBlocks(input.faults ?? [], i, fleet.engine.numGpuBlocks), model: fleet.model, workerId,
        speedupRatio: input.engineSpeedup,
      })),
      onBatch: events ? ingest : undefined,
    });
    servers.push(sims);
    const config = replayGatewayConfig(input, workers.map((id, i) => ({ id, url: sims.urls[i]! })));
    if (input.decisionLog) config.decisions = { ...config.decisions, log: input.decisionLog.path, logTokens: input.decisionLog.tokens };
    gw = await createGateway(config, {
      decisionLog: host.decisionLog, fetch: host.fetch, now: clock.now, fineNow: clock.now, log: (line) => void (log.length < 20 && log.push(line)),
    });
    const gateway = gw;
    const front = await host.serve(async (req) => gateway.fetch(req));
    servers.push(front);
    const runStart = clock.now();
    const sampler = new LoadSampler(sims.urls, { fetch: host.fetch, clock, intervalMs: input.sampleEveryMs, runStart });
    sampler.start();
    let ticking = true;
    // Housekeeping a server adapter would run on a timer: expiries, approximate-mode TTLs, health probes.
    const ticker = (async () => {
      while (ticking) {
        await clock.sleep(TICK_MS);
        await gateway.tick();
      }
    })();
    const faultRuns: Promise<void>[] = [];
    const faults = new FaultSchedule(input.faults ?? [], async (f) => {
      // Muted before the cache goes, so not even the restart's own events get through.
      if (f.kind === "lose_events") muted.add(workers[f.worker]!);
      const res = await host.fetch(`${sims.urls[f.worker]}/sim/fault/lose_cache`, { method: "POST" });
      const body = await res.text();
      const what = f.kind === "lose_events" ? "restarted; its KV events no longer reach the gateway" : "lost its cache silently";
      if (log.length < 20) log.push(`fault: w${f.worker} ${what} (${body})`);
    });
    const { records, gaps, schedule } = await runRequests({
      requests: input.requests, divisor: input.traceSpeedup, clock, onProgress: input.onProgress,
      send: (req, onGap) => sendCompletion({
        url: front.url, model: fleet.model, index: req.index, requestId: `${policy}-${req.index}`, tokens: promptTokens(req),
        maxTokens: Math.max(1, req.outputLength), now: clock.now, runStart, fetch: host.fetch, onGap,
      }),
      afterSend: (sent, total) => void faultRuns.push(...faults.sent(sent, total)),
    });
    await Promise.all(faultRuns);
    ticking = false;
    const load = await sampler.stop();
    await ticker;
    return { policy, workers, records, gaps, load, schedule, events, log };
  } finally {
    await Promise.all(servers.map((s) => s.close()));
    // Writes the decision log's last lines.
    await gw?.close();
  }
}
