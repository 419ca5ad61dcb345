/**
 * @module The body of GET /v1/stats: the fleet's live state (per worker and rank: health, load, cache usage, remote
 * load), the KV-event ingest totals, the per-interval time series and the last decisions with every candidate.
 * Read from the gateway's own objects — nothing here parses the Prometheus text.
 */
import type { DecisionRecord } from "../routing/decision-record.ts";
import { rankMapKey, type RankLoadSnapshot, type RankPrediction } from "../routing/index.ts";
import type { GatewayState } from "./gateway-state.ts";
import type { TimelineSeries } from "./stats-timeline.ts";

/** Decisions the stats carry at most (the table shows the newest first). */
export const MAX_STATS_DECISIONS = 50;

export interface RankStats {
  dp_rank: number;
  active_requests: number;
  active_blocks: number;
  active_prefill_tokens: number;
  total_kv_blocks: number | null;
  /** 0..1: the engine's own KV-cache usage when scraped, else the router's active blocks / total_kv_blocks, else null. */
  cache_usage: number | null;
  cache_usage_source: "engine" | "router" | null;
  engine: { running: number; waiting: number } | null;
  remote: { requests: number; prefill_tokens: number; blocks: number };
  /**
   * The closed loop's view of the rank once it has answered with usage: predicted and reported cached tokens so far,
   * their running ratio and error, whether its index is distrusted, and (approximate ranks) the modelled cache size.
   */
  prediction: RankPredictionStats | null;
}

export interface RankPredictionStats {
  samples: number;
  predicted_tokens: number;
  reported_tokens: number;
  ratio: number;
  error: number;
  flagged: boolean;
  /** A KV-event rank whose events stopped arriving, routed as an approximate one until they do. */
  blind: boolean;
  capacity_blocks: number | null;
}

export interface WorkerStats {
  id: string;
  url: string;
  role: string;
  models: readonly string[];
  health: string;
  unreachable: boolean;
  circuit: string | null;
  kv_events: boolean;
  /** Its index view is incomplete (lost KV events not yet rebuilt). */
  cold: boolean;
  engine_metrics_stale: boolean;
  ranks: RankStats[];
}

export interface DecisionStats {
  at: number;
  request_id: string;
  model: string;
  worker: string;
  dp_rank: number;
  via: string;
  overlap_blocks: number;
  prompt_blocks: number;
  predicted_hit_rate: number;
  cost: number;
  candidates: { worker: string; dp_rank: number; overlap_blocks: number; prefill_tokens: number; decode_blocks: number; active_overlap_blocks: number; cost: number; chosen: boolean }[];
}

export interface StatsBody {
  object: "kvgate.stats";
  /** The gateway clock (ms) the stats were read at; series times are on the same clock. */
  now: number;
  interval_ms: number;
  window_ms: number;
  workers: WorkerStats[];
  router: {
    queue_depth: number; live_bookings: number; open_plans: number; sessions: number; index_entries: number; index_capacity: number;
    /** Prompt blocks whose hashes the core's prompt memo supplied, and blocks hashed (cumulative; both 0 with the memo off). */
    prompt_memo_reused_blocks: number; prompt_memo_hashed_blocks: number;
  };
  kv_events: { streams: number; cold_streams: number; replaying: number; events: number; gaps: number; cold_marks: number; restarts: number; dropped: number };
  series: TimelineSeries;
  /** Decisions made since start; `decisions` holds the newest (newest first, at most MAX_STATS_DECISIONS). */
  decisions_total: number;
  decisions: DecisionStats[];
}

function predictionStats(p: RankPrediction | undefined): RankPredictionStats | null {
  return p === undefined ? null : {
    samples: p.samples, predicted_tokens: p.predictedTokens, reported_tokens: p.reportedTokens, ratio: p.ratio, error: p.error, flagged: p.flagged,
    blind: p.blind === true, capacity_blocks: p.capacityBlocks ?? null,
  };
}

function rankStats(gw: GatewayState, r: RankLoadSnapshot, p: RankPrediction | undefined): RankStats {
  const engine = gw.engineMetrics.lastSample(r.worker, r.dpRank);
  const total = r.totalKvBlocks ?? null;
  let usage: number | null = null;
  let source: RankStats["cache_usage_source"] = null;
  if (engine?.kvUsage !== undefined) {
    usage = engine.kvUsage;
    source = "engine";
  } else if (total) {
    usage = Math.min(1, r.activeBlocks / total);
    source = "router";
  }
  return {
    dp_rank: r.dpRank, active_requests: r.activeRequests, active_blocks: r.activeBlocks, active_prefill_tokens: r.activePrefillTokens,
    total_kv_blocks: total, cache_usage: usage, cache_usage_source: source,
    engine: engine ? { running: engine.running, waiting: engine.waiting } : null,
    remote: { requests: r.remote.requests, prefill_tokens: r.remote.prefillTokens, blocks: r.remote.blocks },
    prediction: predictionStats(p),
  };
}

export function decisionStats(d: DecisionRecord): DecisionStats {
  const s = d.signals;
  return {
    at: d.at, request_id: s.requestId, model: d.model, worker: s.worker, dp_rank: s.dpRank, via: s.via,
    overlap_blocks: s.overlapBlocks, prompt_blocks: s.promptBlocks, predicted_hit_rate: s.predictedHitRate, cost: s.cost,
    candidates: d.candidates.map((c, i) => ({
      worker: c.worker, dp_rank: c.dpRank, overlap_blocks: c.overlapBlocks, prefill_tokens: c.prefillTokens, decode_blocks: c.decodeBlocks,
      active_overlap_blocks: c.activeOverlapBlocks, cost: c.cost, chosen: d.chosen !== undefined ? i === d.chosen : c.worker === s.worker && c.dpRank === s.dpRank,
    })),
  };
}

/** Feeds the timeline what it samples rather than observes: queue depth and the ingest counters (on each tick and read). */
export function sampleTimeline(gw: GatewayState): void {
  const ingest = gw.ingest.hub.counters();
  gw.metrics.timeline.queueDepth(gw.router.queueDepth);
  gw.metrics.timeline.sampleIngest({ events: ingest.storedEvents + ingest.removedEvents + ingest.clearedEvents, gaps: ingest.gaps, coldStreams: ingest.coldStreams });
}

/** The stats now; `since` limits the series to intervals starting at or after it, and the decisions to those made since (incremental polling). */
export function buildStats(gw: GatewayState, opts: { since?: number } = {}): StatsBody {
  const snap = gw.router.snapshot();
  sampleTimeline(gw);
  const ingest = gw.ingest.hub.counters();
  const tl = gw.metrics.timeline;
  const byWorker = new Map<string, RankLoadSnapshot[]>();
  for (const r of snap.ranks) byWorker.set(r.worker, [...(byWorker.get(r.worker) ?? []), r]);
  const predictions = new Map(snap.predictions.map((p) => [rankMapKey(p.worker, p.dpRank), p]));
  const workers = gw.fleet.list().map((w): WorkerStats => {
    const ranks = byWorker.get(w.id) ?? [];
    return {
      id: w.id, url: w.url, role: w.role, models: w.models, health: ranks[0]?.health ?? "unknown", unreachable: gw.health.isDown(w.id),
      circuit: gw.health.circuitState(w.id) ?? null, kv_events: w.kvEvents, cold: gw.ingest.hub.isCold(w.id),
      engine_metrics_stale: gw.engineMetrics.isStale(w.id), ranks: ranks.map((r) => rankStats(gw, r, predictions.get(rankMapKey(r.worker, r.dpRank)))),
    };
  });
  const dropped = ingest.droppedBlockSize + ingest.droppedTokenCount + ingest.droppedTier + ingest.droppedGroup + ingest.droppedExtraKeys + ingest.droppedLora;
  return {
    object: "kvgate.stats", now: gw.now(), interval_ms: tl.options.intervalMs, window_ms: tl.windowMs, workers,
    router: { queue_depth: snap.queueDepth, live_bookings: snap.liveBookings, open_plans: snap.openPlans, sessions: snap.sessions, index_entries: gw.index.stats().entries, index_capacity: gw.index.options.capacity, ...memoStats(gw) },
    kv_events: {
      streams: ingest.streams, cold_streams: ingest.coldStreams, replaying: ingest.replaying,
      events: ingest.storedEvents + ingest.removedEvents + ingest.clearedEvents, gaps: ingest.gaps, cold_marks: ingest.coldMarks, restarts: ingest.restarts, dropped,
    },
    series: tl.series(opts.since),
    decisions_total: gw.decisions.total,
    // An incremental poll already holds the older decisions: only those made since its interval start are sent.
    decisions: gw.decisions.recent(MAX_STATS_DECISIONS).filter((d) => opts.since === undefined || d.at >= opts.since).map(decisionStats),
  };
}

function memoStats(gw: GatewayState): { prompt_memo_reused_blocks: number; prompt_memo_hashed_blocks: number } {
  const c = gw.index.counters();
  return { prompt_memo_reused_blocks: c.memoReused, prompt_memo_hashed_blocks: c.memoHashed };
}
