/** @module The injected time sources: a millisecond wall clock for state (TTLs, queue waits) and a fine timer for signals. */

/** Milliseconds; monotonic enough for TTLs. The router never reads the system clock itself. */
export type NowFn = () => number;

/** Default fine-grained timer for per-request timing signals (Web-standard `performance.now`). */
export const performanceNow: NowFn = () => globalThis.performance.now();

/** A clock moved by hand: tests, replays and simulations drive time explicitly. */
export class ManualClock {
  #t: number;

  constructor(start = 0) {
    this.#t = start;
  }

  /** Bound so it can be passed as `now` directly. */
  readonly now: NowFn = () => this.#t;

  advance(ms: number): number {
    if (!(ms >= 0)) throw new RangeError(`cannot move a clock backwards (${ms} ms)`);
    this.#t += ms;
    return this.#t;
  }

  set(t: number): void {
    if (!(t >= this.#t)) throw new RangeError(`cannot move a clock backwards to ${t}`);
    this.#t = t;
  }
}
