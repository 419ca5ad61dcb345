/**
 * @module Sends requests at their arrival times: the first request goes at once, request i at
 * (at_i − at_0) ÷ divisor later. The clock is injected, so tests run a whole schedule on virtual time. Sending is
 * fire-and-forget (a slow response never delays the next arrival: the load is open-loop, like real traffic), and
 * how late each send was is recorded so a run whose client fell behind can be told apart from a slow fleet.
 *
 * The replay's time base is engine milliseconds: simulated engines run `speedup` times faster than the wall clock,
 * so every time the replay schedules or measures is wall time × speedup — the latency a real engine of the same
 * speed would show. Reported numbers therefore do not depend on how fast the bench itself was run.
 */

export interface ScheduleClock {
  /** Milliseconds, monotonic. */
  now(): number;
  /** Resolves after about `ms` (never before). */
  sleep(ms: number): Promise<void>;
}

export interface ScheduleOptions<R> {
  /** Trace ms per clock ms (the product of the trace speed-up and the engines' speed-up). */
  divisor: number;
  clock: ScheduleClock;
  /** Starts request `req`; `planned` is its target time on the clock. Must not throw. */
  send(req: R, planned: number): void;
  signal?: AbortSignal;
}

export interface ScheduleReport {
  started: number;
  sent: number;
  /** Send time minus planned time, clock ms: mean and worst. */
  meanLateMs: number;
  maxLateMs: number;
}

/** Runs the schedule; resolves once every request was sent (or the signal aborted it). */
export async function runSchedule<R extends { at: number }>(requests: readonly R[], o: ScheduleOptions<R>): Promise<ScheduleReport> {
  if (!(o.divisor > 0 && Number.isFinite(o.divisor))) throw new RangeError(`divisor must be a positive number, got ${o.divisor}`);
  const started = o.clock.now();
  const origin = requests.length > 0 ? requests[0]!.at : 0;
  let sent = 0, lateSum = 0, lateMax = 0;
  for (const req of requests) {
    if (o.signal?.aborted) break;
    const planned = started + (req.at - origin) / o.divisor;
    const wait = planned - o.clock.now();
    if (wait > 0) await o.clock.sleep(wait);
    if (o.signal?.aborted) break;
    const late = Math.max(0, o.clock.now() - planned);
    lateSum += late;
    lateMax = Math.max(lateMax, late);
    o.send(req, planned);
    sent++;
  }
  return { started, sent, meanLateMs: sent > 0 ? lateSum / sent : 0, maxLateMs: lateMax };
}

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
