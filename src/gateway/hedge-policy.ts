/**
 * @module When to hedge a slow first token, and how often one may: a learnt TTFT percentile per prompt-size class
 * (powers of two of prompt tokens) and a budget that caps hedges at a share of the requests seen, never above it.
 */

export interface HedgeOptions {
  /** Hedges allowed as a share of requests (0 disables hedging). */
  budget: number;
  /** A first token later than this percentile of its prompt-size class is hedged (0..1). */
  quantile: number;
  /** First-token times a class needs before its percentile is trusted. */
  minSamples: number;
  /** Recent first-token times kept per class. */
  window: number;
}

export const HEDGE_DEFAULTS: HedgeOptions = { budget: 0, quantile: 0.95, minSamples: 50, window: 256 };

class Ring {
  readonly #v: Float64Array;
  #n = 0;
  #cached = NaN;
  #stale = true;

  constructor(size: number) {
    this.#v = new Float64Array(size);
  }

  get count(): number {
    return Math.min(this.#n, this.#v.length);
  }

  push(x: number): void {
    this.#v[this.#n++ % this.#v.length] = x;
    this.#stale = true;
  }

  quantile(q: number): number {
    if (!this.#stale) return this.#cached;
    const sorted = this.#v.slice(0, this.count).sort();
    this.#cached = sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
    this.#stale = false;
    return this.#cached;
  }
}

export interface HedgeStats {
  requests: number;
  hedges: number;
  /** Hedges whose copy answered first. */
  wins: number;
}

export class HedgePolicy {
  readonly options: HedgeOptions;
  readonly #classes = new Map<number, Ring>();
  readonly stats: HedgeStats = { requests: 0, hedges: 0, wins: 0 };

  constructor(options: Partial<HedgeOptions> = {}) {
    this.options = { ...HEDGE_DEFAULTS, ...options };
    const o = this.options;
    if (!(o.budget >= 0 && o.budget <= 1)) throw new RangeError("hedge budget must be in [0, 1]");
    if (!(o.quantile > 0 && o.quantile < 1)) throw new RangeError("hedge quantile must be in (0, 1)");
    if (!(o.minSamples >= 1 && o.window >= o.minSamples)) throw new RangeError("need 1 <= minSamples <= window");
  }

  get enabled(): boolean {
    return this.options.budget > 0;
  }

  /** A request that could be hedged arrived: it adds to what the budget allows. */
  countRequest(): void {
    this.stats.requests++;
  }

  /** How long to wait for a first token before hedging a prompt of this size; undefined: do not hedge it. */
  thresholdMs(promptTokens: number): number | undefined {
    if (!this.enabled) return undefined;
    const ring = this.#classes.get(sizeClass(promptTokens));
    return ring && ring.count >= this.options.minSamples ? ring.quantile(this.options.quantile) : undefined;
  }

  observeTtft(promptTokens: number, ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) return;
    const c = sizeClass(promptTokens);
    let ring = this.#classes.get(c);
    if (!ring) this.#classes.set(c, (ring = new Ring(this.options.window)));
    ring.push(ms);
  }

  /** Takes one hedge from the budget, if the hedges so far plus this one stay within budget × requests. */
  tryAcquire(): boolean {
    // The epsilon keeps float rounding (0.05 × 60 = 2.9999…) from refusing a hedge the budget does allow.
    if (!this.enabled || this.stats.hedges + 1 > this.options.budget * this.stats.requests + 1e-9) return false;
    this.stats.hedges++;
    return true;
  }

  hedgeWon(): void {
    this.stats.wins++;
  }
}

function sizeClass(promptTokens: number): number {
  return promptTokens <= 1 ? 0 : Math.ceil(Math.log2(promptTokens));
}
