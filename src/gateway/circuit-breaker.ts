/**
 * @module A per-worker circuit breaker over upstream attempts: `failures` consecutive failures (connect errors,
 * timeouts, 5xx, broken streams) open it, so the worker takes no new requests for `openMs`; then it is half-open and
 * admits one trial request — success closes it, failure opens it again, an inconclusive answer (429, 408) lets
 * another trial in. Pure state on an injected clock; worker-health.ts applies it to the router.
 */

export type CircuitState = "closed" | "open" | "half_open";

export interface CircuitOptions {
  /** Consecutive failures that open the circuit; 0 disables the breaker. */
  failures: number;
  /** How long an open circuit keeps the worker out before a trial. */
  openMs: number;
}

export class CircuitBreaker {
  state: CircuitState = "closed";
  /** Consecutive failures while closed. */
  consecutive = 0;
  /** Half-open: a trial request is in flight (no other request is admitted meanwhile). */
  trial = false;
  #openedAt = 0;

  constructor(private readonly o: CircuitOptions, private readonly now: () => number) {}

  /** True when the worker may take new requests now. */
  get admits(): boolean {
    return this.state === "closed" || (this.state === "half_open" && !this.trial);
  }

  /** A failed attempt; returns the new state when it changed. */
  failure(): CircuitState | undefined {
    if (this.o.failures <= 0) return undefined;
    if (this.state === "half_open") return this.#open();
    if (this.state === "open") return undefined;
    return ++this.consecutive >= this.o.failures ? this.#open() : undefined;
  }

  /** A worker answered (2xx, or a 4xx that is the request's fault): closes a half-open circuit. */
  success(): CircuitState | undefined {
    this.consecutive = 0;
    if (this.state !== "half_open") return undefined;
    this.state = "closed";
    this.trial = false;
    return "closed";
  }

  /** An answer that says nothing about the worker's health (429, 408): a half-open trial is over, undecided. */
  inconclusive(): void {
    if (this.state === "half_open") this.trial = false;
  }

  /** A request was booked on the worker: in half-open state it is the trial. */
  booked(): boolean {
    if (this.state !== "half_open" || this.trial) return false;
    this.trial = true;
    return true;
  }

  /** Moves an open circuit whose cooldown passed to half-open; returns the new state when it changed. */
  poll(): CircuitState | undefined {
    if (this.state !== "open" || this.now() - this.#openedAt < this.o.openMs) return undefined;
    this.state = "half_open";
    this.trial = false;
    return "half_open";
  }

  #open(): CircuitState {
    this.state = "open";
    this.trial = false;
    this.consecutive = 0;
    this.#openedAt = this.now();
    return "open";
  }
}
