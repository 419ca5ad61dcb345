/**
 * @module The gateway's Prometheus families (names follow the reference router's where it has one, with a
 * `kvgate_` prefix) and the few helpers that feed them, so handlers record facts rather than metric plumbing.
 */
import type { PromptTokenizer } from "../tokenize/types.ts";
import type { KvIndex } from "../core/kv-index.ts";
import type { IngestTotals } from "../events/index.ts";
import type { FreeReason, RouteSignals, RouterSnapshot } from "../routing/index.ts";
import type { ZmqConnectionCounters } from "../events/kv-event-transport.ts";
import { performanceNow, type NowFn } from "../routing/clock.ts";
import { exponentialBuckets, MetricsRegistry, type Counter } from "./metrics-registry.ts";
import { StatsTimeline, type TimelineOptions } from "./stats-timeline.ts";

/** Whose hit rate a measurement is: the base model and the adapter ("" for none); both bounded by the fleet's configuration. */
export interface HitScope {
  readonly model?: string;
  readonly adapter?: string;
}

const RATE_BUCKETS = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1];
const SECONDS = exponentialBuckets(0.001, 2, 18);
/** Compute phases take microseconds: 1 µs … 16 ms. */
const MS_FINE = exponentialBuckets(0.001, 2, 15);

/** Index counter names → the status label of kvgate_kv_events_applied_total. */
const EVENT_STATUS = {
  applied: "ok", parentMissing: "parent_block_not_found", invalid: "invalid_block", capacity: "capacity",
  unknownRemoved: "block_not_found", badSlot: "bad_slot", corrupt: "corrupt",
} as const;
/** ZeroMQ transport counters → the event label of kvgate_zmq_connection_events_total. */
const ZMQ_EVENTS = { connects: "connect", disconnects: "disconnect", socketErrors: "socket_error", protocolErrors: "protocol_error" } as const;
/** Why a two-phase plan closed → the outcome label of kvgate_route_plans_closed_total (stale expiry counts as expired). */
const PLAN_OUTCOMES: Record<FreeReason, string> = {
  finished: "completed", cancelled: "cancelled", plan_expired: "expired", expired: "expired", worker_removed: "worker_removed", failed: "failed",
};
/** Ingest counters rendered per event type. */
const EVENT_TYPES = { storedEvents: "stored", removedEvents: "removed", clearedEvents: "cleared" } as const;

function scopeLabels(scope: HitScope, source: "predicted" | "reported"): Record<string, string> {
  return { model: scope.model ?? "", adapter: scope.adapter ?? "", source };
}

/** The figures of an OpenAI usage object kvgate reads (prompt_tokens > 0; the others only when numbers). */
export interface ReportedUsage {
  prompt: number;
  cached?: number;
  completion?: number;
}

export function readUsage(u: unknown): ReportedUsage | undefined {
  if (u === null || typeof u !== "object") return undefined;
  const { prompt_tokens: prompt, prompt_tokens_details: d, completion_tokens: completion } = u as {
    prompt_tokens?: unknown; prompt_tokens_details?: { cached_tokens?: unknown } | null; completion_tokens?: unknown;
  };
  if (typeof prompt !== "number" || prompt <= 0) return undefined;
  const cached = d?.cached_tokens;
  return { prompt, cached: typeof cached === "number" ? cached : undefined, completion: typeof completion === "number" ? completion : undefined };
}

export class GatewayMetrics {
  readonly registry = new MetricsRegistry();
  readonly requests = this.registry.counter("kvgate_requests_total", "Requests answered, by endpoint and HTTP status");
  readonly ttft = this.registry.histogram("kvgate_time_to_first_token_seconds", "Arrival at kvgate to the first generated token forwarded (streams)", SECONDS);
  readonly itl = this.registry.histogram("kvgate_inter_token_latency_seconds", "Average gap between generated tokens, per stream", SECONDS);
  readonly duration = this.registry.histogram("kvgate_request_duration_seconds", "Arrival to the last byte, by endpoint", SECONDS);
  readonly predictedHit = this.registry.histogram("kvgate_predicted_hit_rate", "Prompt blocks the chosen worker was predicted to hold / prompt blocks", RATE_BUCKETS);
  readonly actualHit = this.registry.histogram("kvgate_actual_hit_rate", "usage.prompt_tokens_details.cached_tokens / prompt_tokens as the worker reported it", RATE_BUCKETS);
  readonly predictedCached = this.registry.counter("kvgate_predicted_cached_tokens_total", "Prompt tokens predicted cached on the chosen worker");
  readonly promptTokens = this.registry.counter("kvgate_reported_prompt_tokens_total", "Prompt tokens workers reported in usage");
  readonly cachedTokens = this.registry.counter("kvgate_reported_cached_tokens_total", "Cached prompt tokens workers reported in usage");
  readonly scopePrompt = this.registry.counter("kvgate_model_prompt_tokens_total", "Prompt tokens by model and LoRA adapter, as kvgate counted them when routing (source=predicted) or as the worker reported them (source=reported)");
  readonly scopeCached = this.registry.counter("kvgate_model_cached_tokens_total", "Cached prompt tokens by model and LoRA adapter: predicted on the chosen worker (source=predicted) or reported by it (source=reported); cached / prompt tokens is the hit rate");
  readonly overhead = this.registry.histogram("kvgate_routing_overhead_ms", "Routing work per request by phase: tokenize, hash_match, schedule, queue (wait), total", MS_FINE);
  readonly queueDepth = this.registry.gauge("kvgate_queue_pending_requests", "Requests parked in the admission queue");
  readonly activeRequests = this.registry.gauge("kvgate_active_requests", "Requests holding a booking on a worker");
  readonly workerBlocks = this.registry.gauge("kvgate_worker_active_decode_blocks", "KV blocks of in-flight requests per worker rank, as the router accounts them");
  readonly workerPrefill = this.registry.gauge("kvgate_worker_active_prefill_tokens", "Prompt tokens not yet prefilled per worker rank");
  readonly workerRequests = this.registry.gauge("kvgate_worker_active_requests", "In-flight requests per worker rank");
  readonly workerHealthy = this.registry.gauge("kvgate_worker_healthy", "1 when the worker takes new requests");
  readonly indexEntries = this.registry.gauge("kvgate_index_entries", "(worker, block) entries in the KV index");
  readonly indexCapacity = this.registry.gauge("kvgate_index_capacity_entries", "(worker, block) entries the KV index holds, fixed at start, by how it was chosen (source=fleet, flag or default)");
  readonly indexOutgrown = this.registry.counter("kvgate_index_outgrown_total", "Workers added after start that left the fleet needing more KV index entries than the index holds");
  readonly kvEvents = this.registry.counter("kvgate_kv_events_total", "KV events applied from engines, by event type");
  readonly kvIngest = this.registry.counter("kvgate_kv_ingest_total", "KV-event ingestion counters summed over every engine stream (drops by reason, gaps, restarts, cold marks, …)");
  readonly kvStreams = this.registry.gauge("kvgate_kv_event_streams", "Open engine KV-event streams, and how many are cold (index view incomplete)");
  readonly kvApplied = this.registry.counter("kvgate_kv_events_applied_total", "KV events applied to the index, by status");
  readonly tokenizerSections = this.registry.counter("kvgate_tokenizer_sections_total", "Precise tokenizers: whole sections between added tokens (chat messages) taken from the section cache (outcome=hit) or encoded (miss), by model");
  readonly promptMemo = this.registry.counter("kvgate_prompt_memo_blocks_total", "Prompt blocks routed through the prompt memo: outcome=reused (hashes taken from a remembered prompt after comparing tokens) or hashed");
  readonly zmqConnections = this.registry.counter("kvgate_zmq_connection_events_total", "ZeroMQ KV-event sockets to engines: connects, disconnects, receive errors, connections closed for breaking the protocol");
  readonly kvBatches = this.registry.counter("kvgate_kv_event_batches_total", "KV-event batches received, by result");
  readonly retries = this.registry.counter("kvgate_retries_total", "Attempts repeated on another worker before the first token, by reason");
  readonly migrations = this.registry.counter("kvgate_migrations_total", "Streams continued on another worker after their first token, by endpoint");
  readonly upstreamFailures = this.registry.counter("kvgate_upstream_failures_total", "Failed worker attempts, by kind");
  readonly cancellations = this.registry.counter("kvgate_client_cancellations_total", "Requests the client abandoned before the end");
  readonly leasesExpired = this.registry.counter("kvgate_stream_leases_expired_total", "Streamed responses whose client stopped reading for --stream-lease-ms (a gone client the runtime did not report): their bookings were given back");
  readonly tokenized = this.registry.counter("kvgate_tokenized_requests_total", "Requests tokenized, by mode (precise or approximate)");
  readonly disaggPrefill = this.registry.counter("kvgate_disagg_prefill_total", "Disaggregated dispatches by flow and where the prompt was prefilled: remote (prefill worker) or local (on the decode worker), with the reason");
  readonly plansOpened = this.registry.counter("kvgate_route_plans_opened_total", "Two-phase plans opened (POST /v1/route with commit)");
  readonly plansClosed = this.registry.counter("kvgate_route_plans_closed_total", "Two-phase plans closed, by outcome: completed, cancelled, expired (TTL or stale booking), worker_removed");
  readonly plansOpen = this.registry.gauge("kvgate_route_plans_open", "Two-phase plans open (booked, not yet completed, cancelled or expired)");
  readonly predictionError = this.registry.gauge("kvgate_prediction_error", "Closed loop, per worker rank: running mean of (predicted − reported cached tokens) / prompt tokens; 0 = predictions confirmed, > 0 = kvgate over-predicts");
  readonly predictionRatio = this.registry.gauge("kvgate_prediction_ratio", "Closed loop, per worker rank: reported over predicted cached tokens (running means; 1 = right)");
  readonly approxTtl = this.registry.gauge("kvgate_approx_block_ttl_seconds", "Closed loop, approximate-mode worker ranks: the block lifetime learnt from reported hits");
  readonly approxCapacity = this.registry.gauge("kvgate_approx_cache_capacity_blocks", "Closed loop, approximate-mode worker ranks: the cache size kvgate models the rank with (declared, then learnt from reported hits)");
  readonly approxRefreshed = this.registry.counter("kvgate_approx_blocks_refreshed_total", "Approximate-mode ranks: blocks of in-flight prompts (this replica's or its peers') recorded again while they run, as their engine cannot evict them");
  readonly hotPrefixes = this.registry.gauge("kvgate_hot_prefixes", "Hot-prefix spreading: prompt prefixes tracked, and those now served from a subset of at least two workers (state=spread)");
  readonly hotPrefixDecisions = this.registry.counter("kvgate_hot_prefix_decisions_total", "Routing decisions hot-prefix spreading restricted to its prefix's workers");
  readonly hedges = this.registry.counter("kvgate_hedges_total", "Streams hedged for a slow first token, by which attempt answered first (primary or copy)");
  readonly blinded = this.registry.counter("kvgate_index_blind_total", "Times the closed loop found a KV-event worker rank blind (it kept prefilling new blocks with none of its KV events arriving) and began recording its routed prompts");
  readonly blind = this.registry.gauge("kvgate_index_blind", "Closed loop, per KV-event worker rank: 1 while it is routed in approximate mode because its KV events stopped reaching kvgate");
  readonly distrusted = this.registry.counter("kvgate_index_distrusted_total", "Times the closed loop dropped a KV-event worker's index entries because its engine kept reporting far fewer hits than predicted");
  readonly disaggLeg = this.registry.histogram("kvgate_disagg_leg_seconds", "Disaggregated legs: prefill (request to the prefill worker's full answer), decode_start (decode request to its response headers, KV transfer included)", SECONDS);

  /** The same observations per interval, for /v1/stats and the dashboard. */
  readonly timeline: StatsTimeline;

  constructor(now: NowFn = performanceNow, timeline?: TimelineOptions) {
    this.timeline = new StatsTimeline(now, timeline);
    // Counters exist at 0 from the start so dashboards and rate() see them before the first event.
    for (const s of Object.values(EVENT_STATUS)) this.kvApplied.inc({ status: s }, 0);
    for (const outcome of ["reused", "hashed"]) this.promptMemo.inc({ outcome }, 0);
    for (const t of ["stored", "removed", "cleared"]) this.kvEvents.inc({ event_type: t }, 0);
    this.cancellations.inc(undefined, 0);
    this.leasesExpired.inc(undefined, 0);
    this.indexOutgrown.inc(undefined, 0);
    this.plansOpened.inc(undefined, 0);
    for (const o of ["completed", "cancelled", "expired", "worker_removed"]) this.plansClosed.inc({ outcome: o }, 0);
  }

  planOpened(): void {
    this.plansOpened.inc();
  }

  planClosed(reason: FreeReason): void {
    this.plansClosed.inc({ outcome: PLAN_OUTCOMES[reason] });
  }

  routed(s: RouteSignals, tokenizeMs: number, scope?: HitScope): void {
    this.timeline.routed(s.requestTokens, s.cachedTokens, s.queueDepth);
    this.predictedHit.observe(undefined, s.predictedHitRate);
    this.predictedCached.inc(undefined, s.cachedTokens);
    if (scope) {
      const l = scopeLabels(scope, "predicted");
      this.scopePrompt.inc(l, s.requestTokens);
      this.scopeCached.inc(l, s.cachedTokens);
    }
    this.overhead.observe({ phase: "tokenize" }, tokenizeMs);
    this.overhead.observe({ phase: "hash_match" }, s.timings.hashMatchMs);
    this.overhead.observe({ phase: "schedule" }, s.timings.scheduleMs);
    this.overhead.observe({ phase: "queue" }, s.timings.queueMs);
    this.overhead.observe({ phase: "total" }, tokenizeMs + s.timings.hashMatchMs + s.timings.scheduleMs);
  }

  /** Records a worker's reported usage (the actual cache hit next to the predicted one). */
  usage(u: unknown, scope?: HitScope): ReportedUsage | undefined {
    const r = readUsage(u);
    if (!r) return undefined;
    const { prompt, cached } = r;
    this.promptTokens.inc(undefined, prompt);
    if (cached !== undefined) {
      this.cachedTokens.inc(undefined, cached);
      this.actualHit.observe(undefined, Math.min(1, cached / prompt));
      this.timeline.reported(prompt, cached);
      if (scope) {
        const l = scopeLabels(scope, "reported");
        this.scopePrompt.inc(l, prompt);
        this.scopeCached.inc(l, Math.min(prompt, cached));
      }
    }
    return r;
  }

  /** A stream's first generated token forwarded, `seconds` after the request arrived. */
  firstToken(seconds: number): void {
    this.ttft.observe(undefined, seconds);
    this.timeline.firstToken(seconds * 1000);
  }

  /** A stream's average gap between generated tokens. */
  interToken(seconds: number): void {
    this.itl.observe(undefined, seconds);
    this.timeline.interToken(seconds * 1000);
  }

  /** A /v1/ request answered (the request counter, and rejections and errors per interval). */
  answered(endpoint: string, status: number): void {
    this.requests.inc({ endpoint, code: status });
    this.timeline.answered(status);
  }

  /** Last absolute value of each synced source counter, so counters only ever grow by the difference. */
  readonly #seen = new Map<string, number>();

  #sync(c: Counter, labels: Record<string, string>, absolute: number): void {
    const key = `${c.name}\u0000${JSON.stringify(labels)}`;
    const last = this.#seen.get(key) ?? 0;
    // A source that went back restarted from zero (a tokenizer loaded again, say); the core's counters never do.
    const d = absolute >= last ? absolute - last : absolute;
    this.#seen.set(key, absolute);
    // inc by 0 still creates the series: a counter shows at 0 from the first scrape that has its source.
    c.inc(labels, d > 0 ? d : 0);
  }

  /** The exposition text, with the load gauges and ingest counters refreshed from their sources first. */
  render(snap: RouterSnapshot, index: KvIndex, ingest: IngestTotals, zmq?: Readonly<ZmqConnectionCounters>,
    tokenizers: readonly PromptTokenizer[] = []): string {
    for (const t of tokenizers) {
      if (!t.sections) continue;
      this.#sync(this.tokenizerSections, { model: t.model, outcome: "hit" }, t.sections.hits);
      this.#sync(this.tokenizerSections, { model: t.model, outcome: "miss" }, t.sections.misses);
    }
    if (zmq) for (const [k, event] of Object.entries(ZMQ_EVENTS)) this.#sync(this.zmqConnections, { event }, zmq[k as keyof typeof ZMQ_EVENTS]);
    const core = index.counters() as Record<string, number>;
    for (const [k, status] of Object.entries(EVENT_STATUS)) this.#sync(this.kvApplied, { status }, core[k] ?? 0);
    this.#sync(this.promptMemo, { outcome: "reused" }, core.memoReused ?? 0);
    this.#sync(this.promptMemo, { outcome: "hashed" }, core.memoHashed ?? 0);
    for (const [k, t] of Object.entries(EVENT_TYPES)) this.#sync(this.kvEvents, { event_type: t }, ingest[k as keyof typeof EVENT_TYPES]);
    for (const [k, v] of Object.entries(ingest)) {
      if (k === "streams" || k === "coldStreams" || k === "replaying" || k in EVENT_TYPES) continue;
      this.#sync(this.kvIngest, { counter: k }, v);
    }
    this.kvStreams.set({ state: "open" }, ingest.streams);
    this.kvStreams.set({ state: "cold" }, ingest.coldStreams);
    this.queueDepth.set(undefined, snap.queueDepth);
    this.activeRequests.set(undefined, snap.liveBookings);
    this.plansOpen.set(undefined, snap.openPlans);
    for (const g of [this.workerBlocks, this.workerPrefill, this.workerRequests, this.workerHealthy]) g.reset();
    for (const r of snap.ranks) {
      const l = { worker: r.worker, dp_rank: r.dpRank };
      this.workerBlocks.set(l, r.activeBlocks);
      this.workerPrefill.set(l, r.activePrefillTokens);
      this.workerRequests.set(l, r.activeRequests);
      this.workerHealthy.set({ worker: r.worker }, r.health === "healthy" ? 1 : 0);
    }
    for (const g of [this.predictionError, this.predictionRatio, this.approxTtl, this.approxCapacity, this.blind]) g.reset();
    for (const p of snap.predictions) {
      const l = { worker: p.worker, dp_rank: p.dpRank };
      this.predictionError.set(l, p.error);
      this.predictionRatio.set(l, p.ratio);
      if (p.precise === false) this.approxTtl.set(l, p.ttlMs / 1000);
      if (p.capacityBlocks !== undefined) this.approxCapacity.set(l, p.capacityBlocks);
      if (p.blind === true) this.blind.set(l, 1);
    }
    if (snap.hotPrefixes) {
      this.hotPrefixes.set({ state: "tracked" }, snap.hotPrefixes.tracked);
      this.hotPrefixes.set({ state: "spread" }, snap.hotPrefixes.spread);
      this.#sync(this.hotPrefixDecisions, {}, snap.hotPrefixes.decisions);
    }
    this.indexEntries.set(undefined, index.stats().entries);
    return this.registry.render();
  }
}
