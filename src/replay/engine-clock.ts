/**
 * @module The replay's time base: engine milliseconds. Simulated engines run `speedup` times faster than the wall
 * clock, so every time the replay schedules or measures is wall time × speedup — the latency a real engine of the
 * same speed would show. Reported numbers therefore do not depend on how fast the bench itself was run.
 */
import type { ScheduleClock } from "./schedule.ts";

export interface WallClock {
  /** Wall milliseconds, monotonic (performance.now on every runtime). */
  now(): number;
  sleep(ms: number): Promise<void>;
}

export const performanceWallClock: WallClock = {
  now: () => globalThis.performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms))),
};

/** A clock in engine ms over a wall clock: reads are multiplied by `speedup`, sleeps divided by it. */
export function engineClock(wall: WallClock, speedup: number): ScheduleClock {
  if (!(speedup > 0 && Number.isFinite(speedup))) throw new RangeError(`speedup must be a positive number, got ${speedup}`);
  return {
    now: () => wall.now() * speedup,
    sleep: (ms) => wall.sleep(ms / speedup),
  };
}
