/** The closed loop's blind ranks: a KV-event rank that keeps prefilling with none of its events arriving is routed as approximate. */
import { describe, expect, it } from "vitest";
import { PredictionMonitor } from "../../src/routing/prediction-monitor.ts";
import { BS, fixture, prompt, worker, type Fixture } from "./helpers.ts";

/** Routes `tokens` to `target` and finishes it; returns the routing-time prediction on that worker. */
async function sendTo(f: Fixture, id: string, tokens: Uint32Array, target: string): Promise<number> {
  const r = await f.router.route({ requestId: id, tokens, model: "m", target: { worker: target } });
  if (r.kind !== "routed") throw new Error(`not routed: ${r.kind}`);
  r.handle.finish();
  return r.signals.cachedTokens;
}

/** `n` answers from `w`, 400 ms apart: 16-block prompts of which `reportedBlocks` were cached (the rest prefilled). */
function answers(f: Fixture, w: string, n: number, reportedBlocks: number): void {
  for (let i = 0; i < n; i++) {
    f.clock.advance(400);
    f.router.reportUsage({ worker: w, dpRank: 0, predictedTokens: 0, reportedTokens: reportedBlocks * BS, promptTokens: 16 * BS });
  }
}

const blindOf = (f: Fixture, w: string): boolean | undefined => f.router.snapshot().predictions.find((r) => r.worker === w)?.blind;

describe("closed loop: blind KV-event ranks", () => {
  it("records prompts routed to a rank whose events stopped arriving, and stops when a batch of them arrives", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: true }), worker("b", { kvEvents: true })]);
    const p = prompt(11, 16 * BS, 11);
    // Precise mode: routing a prompt records nothing; only the engine's events would.
    await sendTo(f, "r0", p, "b");
    expect(await sendTo(f, "r1", p, "b")).toBe(0);
    // Seven answers that prefilled new blocks: not yet (8 are needed, over at least 2 s).
    answers(f, "b", 7, 4);
    expect(blindOf(f, "b")).toBeUndefined();
    answers(f, "b", 1, 4);
    expect(blindOf(f, "b")).toBe(true);
    expect(f.router.snapshot().predictions.find((r) => r.worker === "b")?.precise).toBe(false);
    // From now on a prompt sent to b is recorded there, as for a worker without events, and predicted next time.
    expect(await sendTo(f, "r2", p, "b")).toBe(0);
    expect(await sendTo(f, "r3", p, "b")).toBe(16 * BS);
    expect((await f.router.query({ requestId: "q", tokens: p, model: "m" })).worker).toBe("b");
    // Its events reach the router again: precise once more, nothing new recorded.
    f.router.kvEventsArrived("b", 0);
    expect(blindOf(f, "b")).toBeUndefined();
    const q = prompt(12, 16 * BS, 12);
    await sendTo(f, "r4", q, "b");
    expect(await sendTo(f, "r5", q, "b")).toBe(0);
  });

  it("needs the answers to be spread over time, and any batch of events in between starts the count again", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: true })]);
    // Twenty answers in one instant (a burst before the engine's next event flush): not blind.
    for (let i = 0; i < 20; i++) f.router.reportUsage({ worker: "a", dpRank: 0, predictedTokens: 0, reportedTokens: 0, promptTokens: 16 * BS });
    expect(blindOf(f, "a")).toBeUndefined();
    f.router.kvEventsArrived("a", 0);
    for (let i = 0; i < 5; i++) {
      answers(f, "a", 5, 0);
      f.router.kvEventsArrived("a", 0);
    }
    expect(blindOf(f, "a")).toBeUndefined();
  });

  it("does not count answers that prefilled no new block, nor act with the loop off", async () => {
    for (const closedLoop of [true, false]) {
      const f = await fixture({ closedLoop }, [worker("a", { kvEvents: true }), worker("b", { kvEvents: true })]);
      // a: every answer a full hit but for less than a block, which stores nothing new.
      for (let i = 0; i < 40; i++) {
        f.clock.advance(400);
        f.router.reportUsage({ worker: "a", dpRank: 0, predictedTokens: 0, reportedTokens: 16 * BS - 3, promptTokens: 16 * BS });
      }
      answers(f, "b", 12, 0);
      expect(blindOf(f, "a")).toBeUndefined();
      expect(blindOf(f, "b")).toBe(closedLoop ? true : undefined);
      const p = prompt(13, 16 * BS, 13);
      await sendTo(f, "r0", p, "b");
      expect(await sendTo(f, "r1", p, "b")).toBe(closedLoop ? 16 * BS : 0);
    }
  });

  it("never calls a worker without KV events blind, and forgets a blind rank when its worker leaves", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: false }), worker("b", { kvEvents: true })]);
    answers(f, "a", 12, 0);
    answers(f, "b", 12, 0);
    expect(blindOf(f, "a")).toBeUndefined();
    expect(blindOf(f, "b")).toBe(true);
    f.router.removeWorker("b");
    f.router.addWorker(worker("b", { kvEvents: true }));
    const p = prompt(14, 16 * BS, 14);
    await sendTo(f, "r0", p, "b");
    expect(await sendTo(f, "r1", p, "b")).toBe(0);
  });

  it("refuses thresholds that could never fire", () => {
    expect(() => new PredictionMonitor({ blindAfterPrefills: 0 })).toThrow(RangeError);
    expect(() => new PredictionMonitor({ blindAfterMs: -1 })).toThrow(RangeError);
  });
});
