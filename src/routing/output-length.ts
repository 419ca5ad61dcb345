/**
 * @module How many tokens a request will generate, predicted before it runs: from its session's past answers, capped
 * by the client's max_tokens, else from the fleet's recent answers. Decode-aware load counts the KV blocks a booking
 * will grow to, not only the prompt blocks it holds when booked.
 */

export interface OutputLengthOptions {
  /** Sessions remembered (least recently answered forgotten first). */
  maxSessions: number;
  /** Recent answers the fleet-wide quantile is taken over. */
  window: number;
  /** Fleet-wide quantile used when a request has neither history nor max_tokens (0..1). */
  quantile: number;
}

const DEFAULTS: OutputLengthOptions = { maxSessions: 10_000, window: 512, quantile: 0.9 };

export class OutputLengthPredictor {
  readonly #sessions = new Map<string, number>();
  readonly #recent: Float64Array;
  #count = 0;
  #quantile = NaN;
  #stale = true;
  readonly #o: OutputLengthOptions;

  constructor(options: Partial<OutputLengthOptions> = {}) {
    this.#o = { ...DEFAULTS, ...options };
    this.#recent = new Float64Array(Math.max(1, this.#o.window));
  }

  /**
   * Expected output tokens. A session's running mean is the best evidence; max_tokens is a hard cap but often far
   * above what is generated, so on its own it is only trusted when the fleet has no history to cap it with.
   */
  expect(sessionId: string | undefined, maxTokens: number | undefined): number {
    const cap = maxTokens !== undefined && maxTokens > 0 ? maxTokens : Infinity;
    const session = sessionId === undefined ? undefined : this.#sessions.get(sessionId);
    if (session !== undefined) return Math.min(cap, session);
    if (cap !== Infinity) return cap;
    const q = this.#fleetQuantile();
    return Number.isFinite(q) ? q : 0;
  }

  /** A request ended having generated `tokens`. */
  observe(sessionId: string | undefined, tokens: number): void {
    if (!(tokens >= 0) || !Number.isFinite(tokens)) return;
    this.#recent[this.#count % this.#recent.length] = tokens;
    this.#count++;
    this.#stale = true;
    if (sessionId === undefined) return;
    const prev = this.#sessions.get(sessionId);
    this.#sessions.delete(sessionId);
    this.#sessions.set(sessionId, prev === undefined ? tokens : prev + 0.5 * (tokens - prev));
    if (this.#sessions.size > this.#o.maxSessions) this.#sessions.delete(this.#sessions.keys().next().value!);
  }

  get sessions(): number {
    return this.#sessions.size;
  }

  #fleetQuantile(): number {
    if (!this.#stale) return this.#quantile;
    const n = Math.min(this.#count, this.#recent.length);
    if (n === 0) return NaN;
    const sorted = this.#recent.slice(0, n).sort();
    this.#quantile = sorted[Math.min(n - 1, Math.floor(this.#o.quantile * n))]!;
    this.#stale = false;
    return this.#quantile;
  }
}
