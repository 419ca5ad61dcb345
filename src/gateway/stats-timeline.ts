/**
 * @module The time series behind /v1/stats and the dashboard: a bounded ring of per-interval buckets (default 2 s ×
 * 300 = the last 10 minutes) fed by what the gateway already observes — decisions, reported usage, first tokens,
 * stream ends, answers, queue depth and the KV-event ingest counters. Clock injected (the gateway's), so tests are exact.
 */
import type { NowFn } from "../routing/index.ts";
import { LatencySketch } from "./latency-sketch.ts";

export interface TimelineOptions {
  intervalMs: number;
  /** Buckets kept (the window is intervalMs × buckets). */
  buckets: number;
}

export const DEFAULT_TIMELINE: TimelineOptions = { intervalMs: 2_000, buckets: 300 };

/** The ingest counters the timeline turns into rates (absolute values; the timeline keeps the differences). */
export interface IngestSample {
  events: number;
  gaps: number;
  coldStreams: number;
}

interface Bucket {
  /** Interval start on the gateway clock (ms, a multiple of intervalMs). */
  t: number;
  routed: number;
  promptTokens: number;
  predictedCached: number;
  reportedPrompt: number;
  reportedCached: number;
  ttft?: LatencySketch;
  itl?: LatencySketch;
  queueMax: number;
  rejected: number;
  errors: number;
  kvEvents: number;
  kvGaps: number;
  coldMax: number;
}

/** Columns of equal length, one entry per interval (null where an interval has nothing to say): what uPlot plots. */
export interface TimelineSeries {
  t: number[];
  requests: number[];
  predicted_hit_rate: (number | null)[];
  reported_hit_rate: (number | null)[];
  ttft_p50_ms: (number | null)[];
  ttft_p99_ms: (number | null)[];
  itl_p50_ms: (number | null)[];
  itl_p99_ms: (number | null)[];
  queue_depth_max: number[];
  rejected: number[];
  errors: number[];
  kv_events_per_s: number[];
  kv_gaps: number[];
  cold_streams: number[];
}

const emptyBucket = (t: number): Bucket => ({
  t, routed: 0, promptTokens: 0, predictedCached: 0, reportedPrompt: 0, reportedCached: 0, queueMax: 0, rejected: 0, errors: 0,
  kvEvents: 0, kvGaps: 0, coldMax: 0,
});

const ratio = (num: number, den: number): number | null => (den > 0 ? Math.min(1, num / den) : null);
const round = (v: number | undefined, digits = 3): number | null => (v === undefined ? null : Number(v.toFixed(digits)));

export class StatsTimeline {
  readonly #ring: Bucket[] = [];
  #lastIngest: { at: number; sample: IngestSample } | undefined;

  constructor(private readonly now: NowFn, readonly options: TimelineOptions = DEFAULT_TIMELINE) {
    if (!(options.intervalMs > 0) || !Number.isInteger(options.buckets) || options.buckets < 1) throw new RangeError("timeline: intervalMs > 0 and buckets >= 1");
  }

  get windowMs(): number {
    return this.options.intervalMs * this.options.buckets;
  }

  /** The open bucket, after opening empty ones for intervals nothing happened in (so rates read 0, not a gap). */
  #current(): Bucket {
    const step = this.options.intervalMs;
    const t = Math.floor(this.now() / step) * step;
    const last = this.#ring.at(-1);
    if (last && last.t >= t) return last;
    const recent = last !== undefined && t - last.t < this.windowMs;
    // Quiet for the whole window: nothing kept is still in it.
    if (!recent) this.#ring.length = 0;
    const from = recent ? last.t + step : t;
    for (let x = from; x <= t; x += step) this.#ring.push(emptyBucket(x));
    if (this.#ring.length > this.options.buckets) this.#ring.splice(0, this.#ring.length - this.options.buckets);
    return this.#ring.at(-1)!;
  }

  /** A scored or pinned decision: prompt tokens and those predicted cached on the chosen worker. */
  routed(promptTokens: number, predictedCached: number, queueDepth: number): void {
    const b = this.#current();
    b.routed++;
    b.promptTokens += promptTokens;
    b.predictedCached += predictedCached;
    if (queueDepth > b.queueMax) b.queueMax = queueDepth;
  }

  /** A worker's usage: prompt tokens and the cached ones it reported. */
  reported(promptTokens: number, cachedTokens: number): void {
    const b = this.#current();
    b.reportedPrompt += promptTokens;
    b.reportedCached += Math.min(promptTokens, cachedTokens);
  }

  firstToken(ms: number): void {
    (this.#current().ttft ??= new LatencySketch()).observe(ms);
  }

  interToken(ms: number): void {
    (this.#current().itl ??= new LatencySketch()).observe(ms);
  }

  /** An answered request: 429 is a rejection (admission queue full or waited too long), 5xx an error. */
  answered(status: number): void {
    if (status === 429) this.#current().rejected++;
    else if (status >= 500) this.#current().errors++;
  }

  queueDepth(depth: number): void {
    const b = this.#current();
    if (depth > b.queueMax) b.queueMax = depth;
  }

  /**
   * The ingest counters now. The growth since the last sample is spread over the intervals it spans in proportion
   * to their overlap, so a sample that comes late (no reader, no timer) does not pile its events into one bucket.
   */
  sampleIngest(s: IngestSample): void {
    const cur = this.#current();
    const at = this.now();
    if (s.coldStreams > cur.coldMax) cur.coldMax = s.coldStreams;
    const prev = this.#lastIngest;
    this.#lastIngest = { at, sample: { ...s } };
    if (!prev) return;
    // A counter that went back was reset (the hub restarted it): count from zero.
    const events = s.events >= prev.sample.events ? s.events - prev.sample.events : s.events;
    const gaps = s.gaps >= prev.sample.gaps ? s.gaps - prev.sample.gaps : s.gaps;
    if (events === 0 && gaps === 0) return;
    const span = at - prev.at;
    if (!(span > 0)) {
      cur.kvEvents += events;
      cur.kvGaps += gaps;
      return;
    }
    const step = this.options.intervalMs;
    for (let i = this.#ring.length - 1; i >= 0; i--) {
      const b = this.#ring[i]!;
      const overlap = Math.min(at, b.t + step) - Math.max(prev.at, b.t);
      if (overlap > 0) {
        b.kvEvents += (events * overlap) / span;
        b.kvGaps += (gaps * overlap) / span;
      }
      if (b.t <= prev.at) break;
    }
  }

  /** Buckets whose interval starts at or after `since` (all kept ones without it), as columns. */
  series(since = -Infinity): TimelineSeries {
    this.#current();
    const out: TimelineSeries = {
      t: [], requests: [], predicted_hit_rate: [], reported_hit_rate: [], ttft_p50_ms: [], ttft_p99_ms: [], itl_p50_ms: [], itl_p99_ms: [],
      queue_depth_max: [], rejected: [], errors: [], kv_events_per_s: [], kv_gaps: [], cold_streams: [],
    };
    const seconds = this.options.intervalMs / 1000;
    for (const b of this.#ring) {
      if (b.t < since) continue;
      out.t.push(b.t);
      out.requests.push(b.routed);
      out.predicted_hit_rate.push(round(ratio(b.predictedCached, b.promptTokens) ?? undefined, 4));
      out.reported_hit_rate.push(round(ratio(b.reportedCached, b.reportedPrompt) ?? undefined, 4));
      out.ttft_p50_ms.push(round(b.ttft?.quantile(0.5)));
      out.ttft_p99_ms.push(round(b.ttft?.quantile(0.99)));
      out.itl_p50_ms.push(round(b.itl?.quantile(0.5)));
      out.itl_p99_ms.push(round(b.itl?.quantile(0.99)));
      out.queue_depth_max.push(b.queueMax);
      out.rejected.push(b.rejected);
      out.errors.push(b.errors);
      out.kv_events_per_s.push(round(b.kvEvents / seconds, 2)!);
      out.kv_gaps.push(round(b.kvGaps, 2)!);
      out.cold_streams.push(b.coldMax);
    }
    return out;
  }
}
