/** The closed loop's trust: a rank whose engine reports half the hits its index predicts is expected to report half. */
import { describe, expect, it } from "vitest";
import { BS, cache, fixture, prompt, worker } from "./helpers.ts";

describe("closed-loop trust in the expected hits", () => {
  it("expects only the share of predicted hits a rank's engine reports", async () => {
    for (const closedLoop of [true, false]) {
      const f = await fixture({ closedLoop }, [worker("a", { kvEvents: true }), worker("b", { kvEvents: true })]);
      const p = prompt(1, 16 * BS, 1);
      cache(f.index, "a", 0, p, 16);
      const before = await f.router.query({ requestId: "q0", tokens: p, model: "m" });
      expect(before).toMatchObject({ worker: "a", cachedTokens: 16 * BS, expectedCachedTokens: 16 * BS });
      // Twenty answers from a: half of each predicted prefix was really cached.
      for (let i = 0; i < 20; i++) f.router.reportUsage({ worker: "a", dpRank: 0, predictedTokens: 16 * BS, reportedTokens: 8 * BS, promptTokens: 16 * BS + 3 });
      const after = await f.router.query({ requestId: "q1", tokens: p, model: "m" });
      expect(after.cachedTokens).toBe(16 * BS);
      if (closedLoop) {
        expect(after.expectedCachedTokens).toBeGreaterThan(7 * BS);
        expect(after.expectedCachedTokens).toBeLessThan(9 * BS);
      } else {
        expect(after.expectedCachedTokens).toBe(16 * BS);
      }
      // The cost is the reference's: only the expectation is discounted.
      expect(after.cost).toBe(before.cost);
    }
  });

  it("gives a rank full trust again when it is removed and comes back", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: true })]);
    const p = prompt(2, 8 * BS, 2);
    cache(f.index, "a", 0, p, 8);
    for (let i = 0; i < 20; i++) f.router.reportUsage({ worker: "a", dpRank: 0, predictedTokens: 8 * BS, reportedTokens: 4 * BS, promptTokens: 8 * BS });
    // Half the hits: discounted, not distrusted (the index still holds the prompt).
    expect(await f.router.query({ requestId: "q", tokens: p, model: "m" })).toMatchObject({ cachedTokens: 8 * BS, expectedCachedTokens: 4 * BS });
    f.router.removeWorker("a");
    f.router.addWorker(worker("a", { kvEvents: true }));
    cache(f.index, "a", 0, p, 8);
    expect((await f.router.query({ requestId: "q2", tokens: p, model: "m" })).expectedCachedTokens).toBe(8 * BS);
  });

  it("discounts an approximate rank's expected hits by the share its engine reports, too", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: false }), worker("b", { kvEvents: false })]);
    const p = prompt(3, 16 * BS, 3);
    const first = await f.router.route({ requestId: "r0", tokens: p, model: "m", target: { worker: "a" } });
    if (first.kind === "routed") first.handle.finish();
    // a holds the prompt by kvgate's own record; its engine reports a third of what that predicts.
    for (let i = 0; i < 24; i++) f.router.reportUsage({ worker: "a", dpRank: 0, predictedTokens: 15 * BS, reportedTokens: 5 * BS, promptTokens: 16 * BS });
    const q = await f.router.query({ requestId: "q", tokens: p, model: "m", target: { worker: "a" } });
    expect(q.cachedTokens).toBe(16 * BS);
    expect(q.expectedCachedTokens).toBeGreaterThan(4 * BS);
    expect(q.expectedCachedTokens).toBeLessThan(7 * BS);
  });

  it("flags a precise rank whose engine misses with no evictions, but not one whose engine evicted meanwhile", async () => {
    for (const evictedSince of [true, false]) {
      const f = await fixture({}, [worker("a", { kvEvents: true }), worker("b", { kvEvents: true })]);
      const p = prompt(4, 16 * BS, 4);
      cache(f.index, "a", 0, p, 16);
      // Every answer a total miss: a saturated engine evicting what queued requests were routed for, or a stale index.
      for (let i = 0; i < 40; i++) {
        f.router.reportUsage({ worker: "a", dpRank: 0, predictedTokens: 16 * BS, reportedTokens: 0, promptTokens: 16 * BS, evictedSince });
      }
      const q = await f.router.query({ requestId: "q", tokens: p, model: "m", target: { worker: "a" } });
      const flagged = f.router.snapshot().predictions.find((r) => r.worker === "a");
      if (evictedSince) {
        // Discounted (nothing is expected to be reported), but the index keeps the rank's blocks.
        expect(q).toMatchObject({ cachedTokens: 16 * BS, expectedCachedTokens: 0 });
        expect(flagged?.flagged).toBe(false);
      } else {
        // Dropped: the index no longer claims what the engine does not have.
        expect(q.cachedTokens).toBe(0);
      }
    }
  });
});
