/** Trust per queue band: hits a rank reports behind a deep queue are learnt apart from those it reports when idle. */
import { describe, expect, it } from "vitest";
import { LoadTrust, TRUST_BANDS, trustBand } from "../../src/routing/load-trust.ts";
import { BS, cache, fixture, prompt, worker } from "./helpers.ts";

describe("trust bands", () => {
  it("puts queued prefill into four bands", () => {
    expect([0, 0.5, 1, 16_383, 16_384, 65_535, 65_536, 1e9].map(trustBand)).toEqual([0, 0, 1, 1, 2, 2, 3, 3]);
  });

  it("learns each band's ratio once it has enough answers, the rank's overall trust until then", () => {
    const trust = new Float64Array(3 * TRUST_BANDS).fill(1);
    const t = new LoadTrust(trust, 0.1, 8);
    for (let i = 0; i < 7; i++) t.observe(1, 3, 1000, 400, 0.9);
    // Band 3 of slot 1 has 7 answers: every band still shows the rank's 0.9; slots 0 and 2 are untouched.
    expect(Array.from(trust.subarray(TRUST_BANDS, 2 * TRUST_BANDS))).toEqual([0.9, 0.9, 0.9, 0.9]);
    t.observe(1, 3, 1000, 400, 0.9);
    expect(trust[TRUST_BANDS + 3]).toBeCloseTo(0.4, 12);
    for (let i = 0; i < 8; i++) t.observe(1, 0, 1000, 1000, 0.9);
    expect(trust[TRUST_BANDS]).toBe(1);
    expect(trust[TRUST_BANDS + 1]).toBe(0.9);
    expect(Array.from(trust.subarray(0, TRUST_BANDS))).toEqual([1, 1, 1, 1]);
    // Answers with nothing predicted do not open a band; more hits than predicted cap at 1.
    for (let i = 0; i < 20; i++) t.observe(2, 2, 0, 500, 1);
    expect(trust[2 * TRUST_BANDS + 2]).toBe(1);
    t.reset(1);
    expect(Array.from(trust.subarray(TRUST_BANDS, 2 * TRUST_BANDS))).toEqual([1, 1, 1, 1]);
    t.observe(1, 3, 1000, 0, 1);
    expect(trust[TRUST_BANDS + 3]).toBe(1);
  });

  it("expects fewer hits from a rank routed behind a deep queue than from the same rank idle", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: true }), worker("b", { kvEvents: true })]);
    const p = prompt(21, 16 * BS, 21);
    cache(f.index, "a", 0, p, 16);
    // Idle answers report every predicted block; answers routed behind 100k queued tokens report a quarter.
    for (let i = 0; i < 20; i++) {
      f.router.reportUsage({ worker: "a", dpRank: 0, predictedTokens: 16 * BS, reportedTokens: 16 * BS, promptTokens: 16 * BS, queuedPrefillTokens: 0 });
      f.router.reportUsage({ worker: "a", dpRank: 0, predictedTokens: 16 * BS, reportedTokens: 4 * BS, promptTokens: 16 * BS, queuedPrefillTokens: 100_000 });
    }
    const idle = await f.router.query({ requestId: "q0", tokens: p, model: "m", target: { worker: "a" } });
    expect(idle).toMatchObject({ cachedTokens: 16 * BS, expectedCachedTokens: 16 * BS, queuedPrefillTokens: 0 });
    // Book a long prompt on a without finishing it: its prefill is queued ahead of the next request there.
    const long = prompt(22, 4096 * BS, 22);
    const held = await f.router.route({ requestId: "hold", tokens: long, model: "m", target: { worker: "a" } });
    expect(held.kind).toBe("routed");
    const busy = await f.router.query({ requestId: "q1", tokens: p, model: "m", target: { worker: "a" } });
    expect(busy.queuedPrefillTokens).toBeGreaterThanOrEqual(65_536);
    expect(busy.cachedTokens).toBe(16 * BS);
    expect(busy.expectedCachedTokens).toBeGreaterThan(3 * BS);
    expect(busy.expectedCachedTokens).toBeLessThan(5 * BS);
  });
});
