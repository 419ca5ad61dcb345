/**
 * @module Time for the simulated engine: a real clock for servers and a virtual one that tests and replays move by
 * hand, so a whole run is a deterministic discrete-event simulation with no wall-clock dependence.
 */

export type CancelTimer = () => void;

export interface SimClock {
  /**
   * Monotonic milliseconds since the clock's origin (fractional). Kept small rather than epoch-based so that
   * sub-microsecond step times survive float64 arithmetic.
   */
  now(): number;
  /** Unix time in ms at `now() === 0`; KV-event `ts` and response `created` are derived from it. */
  readonly epochMs: number;
  /** Runs `fn` once, `delayMs` from now (0 = as soon as possible, never synchronously). */
  setTimer(delayMs: number, fn: () => void): CancelTimer;
}

/** Unix seconds (fractional) at clock time `t`. */
export function unixSeconds(clock: SimClock, t = clock.now()): number {
  return (clock.epochMs + t) / 1000;
}

/**
 * Runs `fn` after the current I/O has been handled. setImmediate where the runtime has it (Node, Bun): a
 * setTimeout(0) there waits a whole millisecond; elsewhere a 0 ms timeout is the closest Web standard.
 */
const macrotask: (fn: () => void) => void = typeof (globalThis as { setImmediate?: unknown }).setImmediate === "function"
  ? (fn) => (globalThis as unknown as { setImmediate(f: () => void): unknown }).setImmediate(fn)
  : (fn) => void setTimeout(fn, 0);

/**
 * Wall time from `performance` (sub-millisecond, monotonic). Delays of a millisecond or more use setTimeout, which is
 * exact enough at that scale. Shorter ones (the steps of a sped-up engine) would otherwise all last a whole timer
 * tick — the engine's latency would come in 1 ms steps, and anything in front of it (a router, a proxy) would be
 * charged the tick it happened to miss — so they wait in macrotasks, checking the clock between I/O turns: the
 * wait costs CPU for at most that fraction of a millisecond, as a GPU engine's host thread spins on its step.
 */
export function realClock(): SimClock {
  const now = (): number => globalThis.performance.now();
  return {
    epochMs: globalThis.performance.timeOrigin,
    now,
    setTimer(delayMs, fn) {
      if (delayMs >= 1) {
        const h = setTimeout(fn, delayMs);
        return () => clearTimeout(h);
      }
      const due = now() + Math.max(0, delayMs);
      let cancelled = false;
      const poll = (): void => {
        if (cancelled) return;
        if (now() >= due) fn();
        else macrotask(poll);
      };
      macrotask(poll);
      return () => {
        cancelled = true;
      };
    },
  };
}

interface Timer {
  at: number;
  order: number;
  fn: () => void;
  cancelled: boolean;
}

/** A clock that only moves when told; due timers fire in (time, creation) order, synchronously, inside `advance`. */
export class VirtualClock implements SimClock {
  #t = 0;
  #order = 0;
  #timers: Timer[] = [];

  /** Time starts at 0; `epochMs` defaults to 2026-01-01T00:00:00Z so event timestamps look like real ones. */
  constructor(readonly epochMs = 1_767_225_600_000) {}

  now(): number {
    return this.#t;
  }

  setTimer(delayMs: number, fn: () => void): CancelTimer {
    const timer: Timer = { at: this.#t + Math.max(0, delayMs), order: this.#order++, fn, cancelled: false };
    this.#timers.push(timer);
    return () => {
      timer.cancelled = true;
    };
  }

  /** Timers not yet fired or cancelled. */
  get pending(): number {
    return this.#timers.filter((t) => !t.cancelled).length;
  }

  #next(): Timer | undefined {
    this.#timers = this.#timers.filter((t) => !t.cancelled);
    let best: Timer | undefined;
    for (const t of this.#timers) if (!best || t.at < best.at || (t.at === best.at && t.order < best.order)) best = t;
    return best;
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way (including ones they set). */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`cannot move a clock backwards (${ms} ms)`);
    const end = this.#t + ms;
    for (let t = this.#next(); t && t.at <= end; t = this.#next()) this.#fire(t);
    this.#t = end;
  }

  /** Fires timers in order until none is left (or `maxTimers` fired, to catch runaway loops); returns how many fired. */
  runUntilIdle(maxTimers = 10_000_000): number {
    let n = 0;
    for (let t = this.#next(); t; t = this.#next()) {
      if (n++ >= maxTimers) throw new Error(`virtual clock still busy after ${maxTimers} timers`);
      this.#fire(t);
    }
    return n;
  }

  #fire(t: Timer): void {
    this.#timers.splice(this.#timers.indexOf(t), 1);
    this.#t = Math.max(this.#t, t.at);
    t.fn();
  }
}
