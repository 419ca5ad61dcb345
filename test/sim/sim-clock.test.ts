import { describe, expect, it } from "vitest";
import { realClock, VirtualClock } from "../../src/sim/sim-clock.ts";

const fired = (clock: ReturnType<typeof realClock>, delayMs: number): Promise<{ at: number; start: number }> =>
  new Promise((resolve) => {
    const start = clock.now();
    clock.setTimer(delayMs, () => resolve({ at: clock.now(), start }));
  });

describe("realClock", () => {
  it("never fires a sub-millisecond timer before it is due", async () => {
    const clock = realClock();
    for (const delay of [0.05, 0.2, 0.5, 0.9]) {
      const { at, start } = await fired(clock, delay);
      expect(at - start).toBeGreaterThanOrEqual(delay);
    }
  });

  it("fires a zero or negative delay asynchronously, not inside setTimer", async () => {
    const clock = realClock();
    const order: string[] = [];
    const done = new Promise<void>((r) => clock.setTimer(-3, () => {
      order.push("timer");
      r();
    }));
    order.push("after setTimer");
    await done;
    expect(order).toEqual(["after setTimer", "timer"]);
  });

  it("does not fire cancelled timers, short or long", async () => {
    const clock = realClock();
    let count = 0;
    clock.setTimer(0.3, () => count++)();
    clock.setTimer(2, () => count++)();
    await fired(clock, 5);
    expect(count).toBe(0);
  });

  it("keeps millisecond delays on setTimeout", async () => {
    const clock = realClock();
    const { at, start } = await fired(clock, 3);
    expect(at - start).toBeGreaterThanOrEqual(2); // setTimeout may round the start down by under a millisecond
  });
});

describe("VirtualClock", () => {
  it("fires due timers in time then creation order inside advance", () => {
    const clock = new VirtualClock();
    const seen: string[] = [];
    clock.setTimer(2, () => seen.push("b"));
    clock.setTimer(1, () => seen.push("a"));
    clock.setTimer(2, () => seen.push("c"));
    clock.advance(1.5);
    expect(seen).toEqual(["a"]);
    clock.advance(1);
    expect(seen).toEqual(["a", "b", "c"]);
    expect(clock.now()).toBe(2.5);
  });
});
