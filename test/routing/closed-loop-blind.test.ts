/** The closed loop's blind ranks: a KV-event rank whose engine reports hits no event announced is routed as approximate. */
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

/** Twenty answers from `w` reporting `reported` cached tokens of a 16-block prompt predicted at `predicted`. */
function answers(f: Fixture, w: string, predicted: number, reported: number): void {
  for (let i = 0; i < 20; i++) f.router.reportUsage({ worker: w, dpRank: 0, predictedTokens: predicted, reportedTokens: reported, promptTokens: 16 * BS });
}

describe("closed loop: blind KV-event ranks", () => {
  it("records prompts routed to a rank whose engine reports hits its events never announced, until events arrive", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: true }), worker("b", { kvEvents: true })]);
    const p = prompt(11, 16 * BS, 11);
    // Precise mode: routing a prompt records nothing; only the engine's events would.
    expect(await sendTo(f, "r0", p, "b")).toBe(0);
    expect(await sendTo(f, "r1", p, "b")).toBe(0);
    answers(f, "b", 0, 12 * BS);
    const snap = f.router.snapshot().predictions.find((r) => r.worker === "b");
    expect(snap?.blind).toBe(true);
    expect(snap?.precise).toBe(false);
    // From now on a prompt sent to b is recorded there, as for a worker without events, and predicted next time.
    expect(await sendTo(f, "r2", p, "b")).toBe(0);
    expect(await sendTo(f, "r3", p, "b")).toBe(16 * BS);
    expect((await f.router.query({ requestId: "q", tokens: p, model: "m" })).worker).toBe("b");
    // Its events reach the router again: precise once more, nothing new recorded.
    f.router.kvEventsArrived("b", 0);
    const q = prompt(12, 16 * BS, 12);
    await sendTo(f, "r4", q, "b");
    expect(await sendTo(f, "r5", q, "b")).toBe(0);
    expect(f.router.snapshot().predictions.find((r) => r.worker === "b")?.blind).toBeUndefined();
  });

  it("leaves ranks alone whose engines confirm the events, and does nothing with the loop off", async () => {
    for (const closedLoop of [true, false]) {
      const f = await fixture({ closedLoop }, [worker("a", { kvEvents: true }), worker("b", { kvEvents: true })]);
      answers(f, "a", 8 * BS, 8 * BS);
      answers(f, "b", 0, 12 * BS);
      const preds = f.router.snapshot().predictions;
      expect(preds.find((r) => r.worker === "a")?.blind).toBeUndefined();
      expect(preds.find((r) => r.worker === "b")?.blind).toBe(closedLoop ? true : undefined);
      const p = prompt(13, 16 * BS, 13);
      await sendTo(f, "r0", p, "b");
      expect(await sendTo(f, "r1", p, "b")).toBe(closedLoop ? 16 * BS : 0);
    }
  });

  it("forgets a blind rank when its worker leaves", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: true }), worker("b", { kvEvents: true })]);
    answers(f, "b", 0, 12 * BS);
    expect(f.router.snapshot().predictions.find((r) => r.worker === "b")?.blind).toBe(true);
    f.router.removeWorker("b");
    f.router.addWorker(worker("b", { kvEvents: true }));
    const p = prompt(14, 16 * BS, 14);
    await sendTo(f, "r0", p, "b");
    expect(await sendTo(f, "r1", p, "b")).toBe(0);
  });
});

describe("PredictionMonitor: blind verdict", () => {
  it("calls a precise rank blind once its engine reports well above prediction, and only then", () => {
    const m = new PredictionMonitor({ minSamples: 8 });
    const v: string[] = [];
    // Slightly above prediction (events a little late): not blind.
    for (let i = 0; i < 40; i++) expect(m.observe("a", 0, 500, 560, 1000, true)).toBe("none");
    for (let i = 0; i < 40; i++) v.push(m.observe("b", 0, 100, 600, 1000, true));
    expect(v.indexOf("blind")).toBeGreaterThanOrEqual(7);
    // Approximate ranks and answers judged unfit (evictions meanwhile) are never called blind.
    for (let i = 0; i < 40; i++) expect(m.observe("c", 0, 0, 600, 1000, false)).toBe("none");
    for (let i = 0; i < 40; i++) expect(m.observe("d", 0, 0, 600, 1000, true, true, false)).toBe("none");
  });

  it("refuses thresholds that could never or always fire", () => {
    expect(() => new PredictionMonitor({ blindShare: 0 })).toThrow(RangeError);
    expect(() => new PredictionMonitor({ blindRatio: 1 })).toThrow(RangeError);
  });
});
