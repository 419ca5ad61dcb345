import { describe, expect, it } from "vitest";
import { PredictionMonitor } from "../../src/routing/prediction-monitor.ts";
import { createPrng } from "../../src/routing/prng.ts";

describe("PredictionMonitor", () => {
  it("reports zero error and no flag when the engine confirms every prediction", () => {
    const m = new PredictionMonitor();
    for (let i = 0; i < 50; i++) expect(m.observe("w0", 0, 512, 512, 1024, true)).toBe("none");
    const [s] = m.snapshot();
    expect(s).toMatchObject({ worker: "w0", dpRank: 0, samples: 50, flagged: false, predictedTokens: 50 * 512, reportedTokens: 50 * 512 });
    expect(s!.error).toBeCloseTo(0, 12);
    expect(s!.ratio).toBeCloseTo(1, 12);
  });

  it("flags a precise rank once its hits collapse after a silent restart, and only that rank", () => {
    const m = new PredictionMonitor({ minSamples: 8 });
    for (let i = 0; i < 20; i++) {
      m.observe("a", 0, 640, 640, 1000, true);
      m.observe("b", 0, 640, 640, 1000, true);
    }
    const verdicts: string[] = [];
    for (let i = 0; i < 30; i++) {
      verdicts.push(m.observe("a", 0, 640, 0, 1000, true));
      m.observe("b", 0, 640, 600, 1000, true);
    }
    expect(verdicts.filter((v) => v === "flagged")).toHaveLength(1);
    expect(m.isFlagged("a", 0)).toBe(true);
    expect(m.isFlagged("b", 0)).toBe(false);
    expect(m.snapshot().find((s) => s.worker === "a")!.error).toBeGreaterThan(0.5);
  });

  it("does not flag a rank that loses part of its hits to eviction under load", () => {
    const m = new PredictionMonitor();
    const rand = createPrng(7);
    for (let i = 0; i < 500; i++) {
      const p = 64 * Math.floor(rand() * 16);
      // Queued requests find ~40% of their predicted blocks evicted before they run.
      expect(m.observe("w", 1, p, Math.round(p * 0.6), 2048, true)).toBe("none");
    }
    expect(m.isFlagged("w", 1)).toBe(false);
  });

  it("counts misses its engine may have evicted in the ratio, but flags only on misses without evictions", () => {
    const m = new PredictionMonitor({ minSamples: 8 });
    for (let i = 0; i < 40; i++) expect(m.observe("w", 0, 640, 0, 1000, true, true, false)).toBe("none");
    expect(m.isFlagged("w", 0)).toBe(false);
    expect(m.trustOf("w", 0)).toBeLessThan(0.01);
    const v: string[] = [];
    for (let i = 0; i < 5; i++) v.push(m.observe("w", 0, 640, 0, 1000, true, true, true));
    expect(v[0]).toBe("flagged");
  });

  it("trusts a flagged rank again when its hits come back", () => {
    const m = new PredictionMonitor({ minSamples: 4, alpha: 0.3 });
    for (let i = 0; i < 10; i++) m.observe("a", 0, 500, 0, 1000, true);
    expect(m.isFlagged("a", 0)).toBe(true);
    const v: string[] = [];
    for (let i = 0; i < 10; i++) v.push(m.observe("a", 0, 500, 500, 1000, true));
    expect(v).toContain("trusted");
    expect(m.isFlagged("a", 0)).toBe(false);
  });

  it("shortens an approximate rank's lifetime when it over-predicts and lengthens it on unpredicted hits", () => {
    const m = new PredictionMonitor({ approxTtlMs: 60_000, minSamples: 10 });
    for (let i = 0; i < 200; i++) m.observe("short", 0, 800, 200, 1000, false);
    for (let i = 0; i < 200; i++) m.observe("long", 0, i % 2 ? 0 : 400, 400, 1000, false);
    for (let i = 0; i < 200; i++) m.observe("right", 0, 400, 400, 1000, false);
    expect(m.ttlFor("short", 0)).toBeLessThan(60_000 / 4);
    expect(m.ttlFor("short", 0)).toBeGreaterThanOrEqual(m.config.minTtlMs);
    expect(m.ttlFor("long", 0)).toBeGreaterThan(60_000 * 2);
    expect(m.ttlFor("right", 0)).toBe(60_000);
    expect(m.ttlFor("unseen", 0)).toBe(60_000);
    // Approximate ranks are steered, never flagged.
    expect(m.isFlagged("short", 0)).toBe(false);
  });

  it("converges to the engine's real lifetime in a simulated approximate loop", () => {
    // An engine keeps a prefix for 15 s; kvgate assumes 120 s. A prefix is predicted cached when its last use is
    // within kvgate's TTL, and reported cached when within the engine's.
    const m = new PredictionMonitor({ minSamples: 10 });
    const rand = createPrng(11);
    const lastUse = new Map<number, number>();
    let now = 0;
    for (let i = 0; i < 4000; i++) {
      now += 100 + rand() * 100;
      const prefix = Math.floor(rand() * 200);
      const last = lastUse.get(prefix);
      const age = last === undefined ? Infinity : now - last;
      const predicted = age <= m.ttlFor("w", 0) ? 512 : 0;
      const reported = age <= 15_000 ? 512 : 0;
      m.observe("w", 0, predicted, reported, 1024, false);
      lastUse.set(prefix, now);
    }
    expect(m.ttlFor("w", 0)).toBeGreaterThan(15_000 / 2);
    expect(m.ttlFor("w", 0)).toBeLessThan(15_000 * 2);
  });

  it("forgets a rank on reset and ignores meaningless samples", () => {
    const m = new PredictionMonitor();
    m.observe("a", 0, 10, 10, 0, true);
    m.observe("a", 0, -1, 10, 100, true);
    expect(m.snapshot()).toHaveLength(0);
    m.observe("a", 0, 10, 10, 100, true);
    m.observe("a", 1, 10, 10, 100, true);
    m.reset("a", 0);
    expect(m.snapshot().map((s) => s.dpRank)).toEqual([1]);
    m.reset("a");
    expect(m.snapshot()).toHaveLength(0);
  });

  it("rejects an inconsistent configuration", () => {
    expect(() => new PredictionMonitor({ alpha: 0 })).toThrow(RangeError);
    expect(() => new PredictionMonitor({ distrustBelow: 0.7, trustAbove: 0.6 })).toThrow(RangeError);
    expect(() => new PredictionMonitor({ minTtlMs: 10, approxTtlMs: 5 })).toThrow(RangeError);
    expect(() => new PredictionMonitor({ step: 1 })).toThrow(RangeError);
  });
});
