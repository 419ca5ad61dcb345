/**
 * @module The closed loop: every response's engine-reported cached tokens checked against what the router predicted
 * for that (worker, rank). A rank whose hits fall far below prediction is flagged (its index is stale), and in
 * approximate mode each rank's block lifetime is steered so predicted hits track the ones the engine reports.
 */

export interface PredictionConfig {
  /** Weight of the newest sample in the running ratios (an EWMA; 0.1 ≈ the last 20 requests). */
  alpha: number;
  /** Samples with a prediction before a rank can be flagged or its lifetime moved. */
  minSamples: number;
  /** Reported/predicted below this flags a precise-mode rank: its index claims blocks the engine no longer has. */
  distrustBelow: number;
  /** A flagged rank is trusted again once its ratio is back above this (events have rebuilt it). */
  trustAbove: number;
  /**
   * A KV-event rank is blind (its events stopped reaching the router) once it answered this many requests that each
   * prefilled at least one new block, over at least `blindAfterMs`, with no batch of its events arriving meanwhile:
   * an engine publishes a stored event for every block it fills.
   */
  blindAfterPrefills: number;
  blindAfterMs: number;
  /** Approximate mode: the lifetime each rank starts from, and its bounds. */
  approxTtlMs: number;
  minTtlMs: number;
  maxTtlMs: number;
  /** Reported/predicted band in which an approximate rank's lifetime is left alone. */
  band: [number, number];
  /** Multiplicative step of one lifetime adjustment, made at most once every `minSamples` responses. */
  step: number;
}

export const PREDICTION_DEFAULTS: PredictionConfig = {
  alpha: 0.1, minSamples: 12, distrustBelow: 0.3, trustAbove: 0.6, blindAfterPrefills: 8, blindAfterMs: 2_000,
  approxTtlMs: 120_000, minTtlMs: 1_000, maxTtlMs: 3_600_000, band: [0.85, 1.1], step: 1.2,
};

/** One rank's running figures as /metrics, /v1/stats and the replay report show them. */
export interface RankPrediction {
  worker: string;
  dpRank: number;
  /** Responses with usage seen for this rank. */
  samples: number;
  predictedTokens: number;
  reportedTokens: number;
  /** EWMA of (predicted − reported) / prompt tokens: 0 when the router is right, > 0 when it over-predicts. */
  error: number;
  /** EWMA of reported tokens over EWMA of predicted ones (1 when right; 1 until anything was predicted). */
  ratio: number;
  flagged: boolean;
  /** Approximate mode's learnt block lifetime for the rank. */
  ttlMs: number;
  /** Approximate mode: the cache size, in blocks, kvgate models the rank with (declared, then learnt). */
  capacityBlocks?: number;
  /** Whether the rank's index comes from KV events (filled in by the closed loop, which knows the worker). */
  precise?: boolean;
  /** A KV-event rank whose events stopped reaching the router, routed as an approximate one meanwhile. */
  blind?: boolean;
}

/** What one observation changed, so the caller can act (distrust an index, log) without polling. */
export type PredictionVerdict = "none" | "flagged" | "trusted";

interface RankState extends RankPrediction {
  meanPredicted: number;
  meanReported: number;
  sinceSteer: number;
}

export class PredictionMonitor {
  readonly #ranks = new Map<string, RankState>();
  readonly config: PredictionConfig;

  constructor(config: Partial<PredictionConfig> = {}) {
    this.config = { ...PREDICTION_DEFAULTS, ...config };
    const c = this.config;
    if (!(c.alpha > 0 && c.alpha <= 1)) throw new RangeError("alpha must be in (0, 1]");
    if (!(c.distrustBelow < c.trustAbove)) throw new RangeError("distrustBelow must be below trustAbove");
    if (!(Number.isInteger(c.blindAfterPrefills) && c.blindAfterPrefills >= 1 && c.blindAfterMs >= 0)) throw new RangeError("need blindAfterPrefills >= 1 and blindAfterMs >= 0");
    if (!(c.minTtlMs > 0 && c.minTtlMs <= c.approxTtlMs && c.approxTtlMs <= c.maxTtlMs)) throw new RangeError("need 0 < minTtlMs <= approxTtlMs <= maxTtlMs");
    if (!(c.step > 1)) throw new RangeError("step must exceed 1");
  }

  /**
   * One response: `predicted` cached tokens at routing time, `reported` by the engine, out of `prompt`. `precise`
   * says whether the rank's index comes from KV events (flagging applies) or from kvgate's own decisions (the
   * lifetime is learnt instead, unless `steerTtl` is false: a capacity bounds the rank). `judge` false: the sample
   * counts in the ratios but cannot flag the rank (its engine evicted blocks meanwhile, so a miss may be an eviction).
   */
  observe(worker: string, dpRank: number, predicted: number, reported: number, prompt: number, precise: boolean, steerTtl = true, judge = true): PredictionVerdict {
    if (!(prompt > 0) || !(predicted >= 0) || !(reported >= 0)) return "none";
    const s = this.#rank(worker, dpRank);
    const a = this.config.alpha;
    const p = Math.min(predicted, prompt), r = Math.min(reported, prompt);
    const first = s.samples === 0;
    s.samples++;
    s.predictedTokens += p;
    s.reportedTokens += r;
    // Means of tokens rather than a mean of per-request ratios: a hit the router did not predict (p = 0) still
    // counts, which is how an approximate rank learns that its lifetime is too short.
    s.error = first ? (p - r) / prompt : s.error + a * ((p - r) / prompt - s.error);
    s.meanPredicted = first ? p : s.meanPredicted + a * (p - s.meanPredicted);
    s.meanReported = first ? r : s.meanReported + a * (r - s.meanReported);
    if (s.meanPredicted > 0) s.ratio = Math.min(s.meanReported / s.meanPredicted, 4);
    if (s.samples < this.config.minSamples || s.predictedTokens === 0) return "none";
    if (precise) return judge ? this.#judge(s) : "none";
    if (steerTtl) this.#steer(s);
    return "none";
  }

  /** The lifetime to record this rank's next routed prompt with (the fixed TTL until the rank has evidence). */
  ttlFor(worker: string, dpRank: number): number {
    return this.#ranks.get(rankMapKey(worker, dpRank))?.ttlMs ?? this.config.approxTtlMs;
  }

  /** Reported over predicted hits for the rank once it has `minSamples` responses, capped at 1; 1 before. */
  trustOf(worker: string, dpRank: number): number {
    const s = this.#ranks.get(rankMapKey(worker, dpRank));
    if (!s || s.samples < this.config.minSamples || s.predictedTokens === 0) return 1;
    return Math.max(0, Math.min(1, s.ratio));
  }

  isFlagged(worker: string, dpRank: number): boolean {
    return this.#ranks.get(rankMapKey(worker, dpRank))?.flagged ?? false;
  }

  /** The rank's index was rebuilt or cleared: old samples describe a view that is gone. */
  reset(worker: string, dpRank?: number): void {
    for (const [k, s] of this.#ranks) if (s.worker === worker && (dpRank === undefined || s.dpRank === dpRank)) this.#ranks.delete(k);
  }

  snapshot(): RankPrediction[] {
    return [...this.#ranks.values()].map(({ meanPredicted: _p, meanReported: _r, sinceSteer: _s, ...rest }) => ({ ...rest }));
  }

  #judge(s: RankState): PredictionVerdict {
    if (!s.flagged && s.ratio < this.config.distrustBelow) {
      s.flagged = true;
      return "flagged";
    }
    if (s.flagged && s.ratio > this.config.trustAbove) {
      s.flagged = false;
      return "trusted";
    }
    return "none";
  }

  /** Over-prediction means blocks live shorter on the engine than assumed; hits beyond prediction mean longer. */
  #steer(s: RankState): void {
    const c = this.config;
    if (++s.sinceSteer < c.minSamples) return;
    s.sinceSteer = 0;
    if (s.ratio < c.band[0]) s.ttlMs = Math.max(c.minTtlMs, s.ttlMs / c.step);
    else if (s.ratio > c.band[1]) s.ttlMs = Math.min(c.maxTtlMs, s.ttlMs * c.step);
  }

  #rank(worker: string, dpRank: number): RankState {
    const k = rankMapKey(worker, dpRank);
    let s = this.#ranks.get(k);
    if (!s) {
      s = { worker, dpRank, samples: 0, predictedTokens: 0, reportedTokens: 0, error: 0, ratio: 1, flagged: false, ttlMs: this.config.approxTtlMs,
        meanPredicted: 0, meanReported: 0, sinceSteer: 0 };
      this.#ranks.set(k, s);
    }
    return s;
  }
}

/** The Map key of one (worker, rank) among the closed loop's per-rank state. */
export function rankMapKey(worker: string, dpRank: number): string {
  return `${worker}\u0000${dpRank}`;
}
