/**
 * @module The closed loop's trust per rank and per queue depth: a request that waits behind much queued prefill finds
 * more of its predicted blocks evicted by the time it runs than one that starts at once, so the share of predicted
 * hits an engine reports is learnt separately for a few bands of the rank's queued prefill at routing time.
 */

/** Bands of queued prefill tokens on the chosen rank at routing time: none, under 16k, under 64k, more. */
export const TRUST_BANDS = 4;

export function trustBand(queuedPrefillTokens: number): number {
  return queuedPrefillTokens < 1 ? 0 : queuedPrefillTokens < 16_384 ? 1 : queuedPrefillTokens < 65_536 ? 2 : 3;
}

/**
 * Writes `trust[slot * TRUST_BANDS + band]`: the band's reported/predicted ratio (EWMA of tokens, capped at 1) once
 * the band has `minSamples` answers with anything predicted, else the rank's overall trust.
 */
export class LoadTrust {
  readonly #samples: Float64Array;
  readonly #predicted: Float64Array;
  readonly #reported: Float64Array;

  constructor(private readonly trust: Float64Array, private readonly alpha: number, private readonly minSamples: number) {
    if (trust.length % TRUST_BANDS !== 0) throw new RangeError(`trust holds ${TRUST_BANDS} bands per slot`);
    this.#samples = new Float64Array(trust.length);
    this.#predicted = new Float64Array(trust.length);
    this.#reported = new Float64Array(trust.length);
  }

  /** One answer of the rank in `slot`, routed in `band`; `rankTrust` fills the bands without enough evidence. */
  observe(slot: number, band: number, predicted: number, reported: number, rankTrust: number): void {
    const i = slot * TRUST_BANDS + band;
    if (predicted > 0 || this.#samples[i]! > 0) {
      const first = this.#samples[i] === 0;
      this.#samples[i]!++;
      this.#predicted[i] = first ? predicted : this.#predicted[i]! + this.alpha * (predicted - this.#predicted[i]!);
      this.#reported[i] = first ? reported : this.#reported[i]! + this.alpha * (reported - this.#reported[i]!);
    }
    for (let b = 0; b < TRUST_BANDS; b++) {
      const j = slot * TRUST_BANDS + b;
      const known = this.#samples[j]! >= this.minSamples && this.#predicted[j]! > 0;
      this.trust[j] = known ? Math.max(0, Math.min(1, this.#reported[j]! / this.#predicted[j]!)) : rankTrust;
    }
  }

  /** The rank starts over (its index was dropped, it went blind, or its worker left): full trust in every band. */
  reset(slot: number): void {
    const from = slot * TRUST_BANDS, to = from + TRUST_BANDS;
    this.#samples.fill(0, from, to);
    this.#predicted.fill(0, from, to);
    this.#reported.fill(0, from, to);
    this.trust.fill(1, from, to);
  }
}
