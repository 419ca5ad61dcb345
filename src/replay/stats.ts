/**
 * @module The numbers a routing comparison is judged on: distributions (mean, percentiles), CDF curves for plotting
 * and the per-policy summary of a replay (latencies, actual cache hit rate, throughput, errors).
 */
import type { CompletionRecord } from "./completion-client.ts";

export interface Distribution {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Quantile of ascending values with linear interpolation between closest ranks (NaN when empty). */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  const pos = (n - 1) * Math.min(1, Math.max(0, q));
  const lo = Math.floor(pos), hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

export function distribution(values: readonly number[] | Float64Array): Distribution {
  const s = Float64Array.from(values).sort();
  let sum = 0;
  for (const v of s) sum += v;
  const n = s.length;
  return { count: n, mean: n ? sum / n : NaN, p50: quantile(s, 0.5), p90: quantile(s, 0.9), p99: quantile(s, 0.99), max: n ? s[n - 1]! : NaN };
}

/** Empirical CDF as (value, fraction ≤ value) points, thinned to at most `maxPoints` (the extremes always kept). */
export function cdfPoints(values: readonly number[], maxPoints = 200): [number, number][] {
  const s = Float64Array.from(values).sort();
  const n = s.length;
  if (n === 0) return [];
  const step = Math.max(1, Math.ceil(n / maxPoints));
  const out: [number, number][] = [];
  for (let i = 0; i < n; i += step) out.push([s[i]!, (i + 1) / n]);
  if (out[out.length - 1]![0] !== s[n - 1] || out[out.length - 1]![1] !== 1) out.push([s[n - 1]!, 1]);
  return out;
}

export interface HitBucket {
  /** Bucket start, ms since the run started (by send time). */
  t: number;
  requests: number;
  /** Cached prompt tokens / prompt tokens of the bucket's completed requests. */
  rate: number;
}

/** Actual hit rate over time: requests grouped by send time into buckets of `bucketMs`. */
export function hitRateOverTime(records: readonly CompletionRecord[], bucketMs: number): HitBucket[] {
  const buckets = new Map<number, { n: number; prompt: number; cached: number }>();
  for (const r of records) {
    if (r.cachedTokens === undefined) continue;
    const k = Math.floor(r.sentAt / bucketMs);
    const b = buckets.get(k) ?? { n: 0, prompt: 0, cached: 0 };
    b.n++;
    b.prompt += r.promptTokens;
    b.cached += r.cachedTokens;
    buckets.set(k, b);
  }
  return [...buckets.entries()].sort((a, b) => a[0] - b[0]).map(([k, b]) => ({ t: k * bucketMs, requests: b.n, rate: b.prompt ? b.cached / b.prompt : 0 }));
}

export interface PolicySummary {
  requests: number;
  completed: number;
  errors: number;
  ttftMs: Distribution;
  /** Over every gap between content chunks of every request. */
  itlMs: Distribution;
  e2eMs: Distribution;
  promptTokens: number;
  cachedTokens: number;
  /** Actual hit rate: cached prompt tokens reported by the engines / prompt tokens. */
  hitRate: number;
  outputTokens: number;
  /** First send to last response end. */
  durationMs: number;
  outputTokensPerSec: number;
}

export function summarize(records: readonly CompletionRecord[], gaps: readonly number[] | Float64Array): PolicySummary {
  const ok = records.filter((r) => !r.error && r.ttftMs !== undefined);
  let prompt = 0, cached = 0, output = 0, end = 0, start = Infinity;
  for (const r of ok) {
    prompt += r.promptTokens;
    cached += r.cachedTokens ?? 0;
    output += r.completionTokens ?? 0;
  }
  for (const r of records) {
    start = Math.min(start, r.sentAt);
    end = Math.max(end, r.sentAt + (r.e2eMs ?? 0));
  }
  const durationMs = records.length ? end - start : 0;
  return {
    requests: records.length, completed: ok.length, errors: records.length - ok.length,
    ttftMs: distribution(ok.map((r) => r.ttftMs!)), itlMs: distribution(gaps), e2eMs: distribution(ok.map((r) => r.e2eMs!)),
    promptTokens: prompt, cachedTokens: cached, hitRate: prompt ? cached / prompt : 0, outputTokens: output,
    durationMs, outputTokensPerSec: durationMs > 0 ? output / (durationMs / 1000) : 0,
  };
}
