/**
 * @module A fixed-size log-bucket latency sketch (relative error about ±4%) for the p50/p99 of one stats interval.
 * The Prometheus histograms' 18 doubling buckets are too coarse for a quantile line, and keeping raw samples per
 * interval would make memory follow traffic; this keeps 234 counters per interval whatever the load.
 */

/** Smallest value told apart (ms); anything below counts in the first bucket. */
const MIN_MS = 0.01;
/** Each bucket's upper bound is this factor above the previous one. */
const FACTOR = 1.08;
const LOG_FACTOR = Math.log(FACTOR);
/** Up to 10 minutes; longer values count in the last bucket. */
export const SKETCH_BUCKETS = Math.ceil(Math.log(600_000 / MIN_MS) / LOG_FACTOR) + 1;

function bucketOf(ms: number): number {
  if (!(ms > MIN_MS)) return 0;
  return Math.min(SKETCH_BUCKETS - 1, Math.ceil(Math.log(ms / MIN_MS) / LOG_FACTOR));
}

/** The value a bucket stands for: the geometric middle of its bounds. */
function valueOf(bucket: number): number {
  if (bucket === 0) return MIN_MS;
  return MIN_MS * FACTOR ** (bucket - 0.5);
}

export class LatencySketch {
  readonly #counts = new Uint32Array(SKETCH_BUCKETS);
  #count = 0;
  #max = 0;

  get count(): number {
    return this.#count;
  }

  observe(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) return;
    this.#counts[bucketOf(ms)]!++;
    this.#count++;
    if (ms > this.#max) this.#max = ms;
  }

  /** The q-quantile (0..1) in ms, or undefined with no sample; never above the largest value seen. */
  quantile(q: number): number | undefined {
    if (this.#count === 0) return undefined;
    // Nearest rank: the smallest value with at least q·n samples at or below it.
    const rank = Math.max(1, Math.ceil(q * this.#count));
    let seen = 0;
    for (let i = 0; i < SKETCH_BUCKETS; i++) {
      seen += this.#counts[i]!;
      if (seen >= rank) return Math.min(valueOf(i), this.#max);
    }
    return this.#max;
  }
}
