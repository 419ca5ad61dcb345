/** An approximate rank's shortfall bounds its engine's cache at once: the recency ages kept from its routing decision. */
import { describe, expect, it } from "vitest";
import { CapacityLearner } from "../../src/routing/capacity-learner.ts";
import { missBound, type RecencyProfile } from "../../src/routing/recency-bound.ts";
import { NEED_NEVER as NEVER } from "../../src/wasm/abi.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";
import { BS, fixture, prompt, worker } from "./helpers.ts";

const profile = (needs: number[], clock = 1_000, inflightBlocks = 0): RecencyProfile => ({ needs: Uint32Array.from(needs), clock, inflightBlocks });

describe("missBound", () => {
  it("should bound by the first missing block's need plus what was routed since", () => {
    const p = profile([0, 40, 40, 300, 900, 900, 900]);
    expect(missBound(p, 3 * BS, BS, 1_000)).toBe(300);
    expect(missBound(p, 3 * BS + 5, BS, 1_250)).toBe(550);
    // Four of seven predicted blocks is more than a miss: it bounds nothing.
    expect(missBound(p, 4 * BS, BS, 1_000)).toBeUndefined();
    // The clock wraps at 2^32.
    expect(missBound(profile([0, 70, 70], 0xffff_fff0), 1 * BS, BS, 0x10)).toBe(70 + 0x20);
  });

  it("should bound nothing when every predicted block was there, the block was never held, or it may not have been prefilled", () => {
    expect(missBound(profile([0, 40, 300]), 3 * BS, BS, 1_000)).toBeUndefined();
    expect(missBound(profile([0, NEVER, NEVER]), 1 * BS, BS, 1_000)).toBeUndefined();
    expect(missBound(profile([0, 300, 300], 1_000, 300), 1 * BS, BS, 1_000)).toBeUndefined();
    expect(missBound(profile([0, 301, 301], 1_000, 300), 1 * BS, BS, 1_000)).toBe(301);
  });
});

describe("CapacityLearner with a bound", () => {
  it("should drop to a shortfall's bound at once, never below a quarter, and ignore bounds on surpluses", () => {
    const l = new CapacityLearner();
    l.start("r", 10_000);
    expect(l.blocksOf("r")).toBe(9_500);
    expect(l.observe("r", 20 * BS, 4 * BS, BS, () => 0, 6_000)).toBe(6_000);
    expect(l.observe("r", 20 * BS, 4 * BS, BS, () => 0, 1_000)).toBe(1_500);
    // A bound above what the step gives changes nothing; a surplus grows by the step whatever the bound.
    expect(l.observe("r", 20 * BS, 4 * BS, BS, () => 0, 50_000)).toBe(1_433);
    expect(l.observe("r", 4 * BS, 20 * BS, BS, () => 0, 10)).toBe(1_462);
  });
});

/**
 * One approximate worker declaring 2,048 blocks whose engine really caches 512 (an LRU over the blocks it prefilled,
 * a prompt's first block most recent), 200 prompt families of 16 blocks chosen at random: how many answers fall short
 * before the model's capacity comes within 25% of the engine's, with the decisions' recency ages and without.
 */
const FAMILIES = 200;

async function answersToLearn(withDecision: boolean): Promise<{ shortfalls: number; capacity: number; learntAt: number }> {
  const real = 512;
  const f = await fixture({}, [worker("a", { kvEvents: false, totalKvBlocks: 2_048 })]);
  const engine = new Map<string, true>();
  const families = Array.from({ length: FAMILIES }, (_, i) => prompt(500 + i, 16 * BS, i));
  const rnd = seededRandom(11);
  let shortfalls = 0, learntAt = -1;
  for (let i = 0; i < 600 && learntAt < 0; i++) {
    const fam = rnd.int(families.length);
    const r = await f.router.route({ requestId: `r${i}`, tokens: families[fam]!, model: "m" });
    if (r.kind !== "routed") throw new Error(r.kind);
    let hit = 0;
    while (hit < 16 && engine.has(`${fam}:${hit}`)) hit++;
    for (let b = 15; b >= 0; b--) {
      engine.delete(`${fam}:${b}`);
      engine.set(`${fam}:${b}`, true);
    }
    while (engine.size > real) engine.delete(engine.keys().next().value!);
    r.handle.finish();
    if (hit * BS < r.signals.cachedTokens) shortfalls++;
    f.router.reportUsage({
      worker: "a", dpRank: 0, predictedTokens: r.signals.cachedTokens, reportedTokens: hit * BS, promptTokens: 16 * BS,
      ...(withDecision ? { decision: r.signals } : {}),
    });
    const cap = f.router.snapshot().predictions.find((p) => p.worker === "a")?.capacityBlocks;
    if (cap !== undefined && cap <= real * 1.25) learntAt = i;
  }
  return { shortfalls, capacity: f.router.snapshot().predictions.find((p) => p.worker === "a")!.capacityBlocks!, learntAt };
}

describe("approximate ranks learn their engine's cache from the recency of what they missed", () => {
  it("should find a cache a quarter of the declared size in a few shortfalls, where steps alone take several times more", async () => {
    const fast = await answersToLearn(true);
    const slow = await answersToLearn(false);
    expect(fast.learntAt).toBeGreaterThanOrEqual(0);
    expect(fast.capacity).toBeGreaterThanOrEqual(256);
    expect(fast.shortfalls).toBeLessThanOrEqual(3);
    expect(slow.learntAt < 0 || slow.shortfalls >= 3 * fast.shortfalls, `steps alone: ${JSON.stringify(slow)}; with ages: ${JSON.stringify(fast)}`).toBe(true);
  });
});
