/** Approximate mode's learnt capacity: the LRU model of a rank's cache shrinks and grows until it matches the engine. */
import { describe, expect, it } from "vitest";
import { CapacityLearner } from "../../src/routing/capacity-learner.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";
import { BS, fixture, prompt, worker } from "./helpers.ts";
import * as hooks from "../support/kv-index-hooks.ts";

describe("CapacityLearner", () => {
  it("should find an engine's real eviction point from shortfalls and surpluses alone", () => {
    // An engine that evicts a prefix once more than `real` blocks have gone in after it; the model predicts a hit
    // whenever fewer than its own capacity have. The learner sees only predicted and reported tokens.
    for (const [declared, real] of [[16_384, 4_096], [16_384, 15_200], [4_000, 7_000]] as const) {
      const l = new CapacityLearner();
      l.start("r", declared);
      const rnd = seededRandom(declared + real);
      for (let i = 0; i < 600; i++) {
        const age = rnd.int(2 * Math.max(declared, real));
        const predicted = age < l.blocksOf("r")! ? 40 * BS : 0;
        const reported = age < real ? 40 * BS : 0;
        l.observe("r", predicted, reported, BS, () => 0);
      }
      const learnt = l.blocksOf("r")!;
      // Within a few per cent, except that a cache beyond twice the declared size is not believed.
      expect(Math.abs(learnt - Math.min(real, 2 * declared)) / real, `declared ${declared}, real ${real}: learnt ${learnt}`).toBeLessThan(0.06);
    }
  });

  it("should start an undeclared rank from what the model held at its first shortfall, and ignore noise under a block", () => {
    const l = new CapacityLearner();
    expect(l.observe("r", 10 * BS, 20 * BS, BS, () => 500)).toBeUndefined();
    expect(l.blocksOf("r")).toBeUndefined();
    expect(l.observe("r", 10 * BS, 10 * BS - 3, BS, () => 500)).toBeUndefined();
    expect(l.observe("r", 10 * BS, 2 * BS, BS, () => 500)).toBe(490);
    expect(l.snapshot("r")).toEqual({ blocks: 490, moves: 1 });
  });

  it("should refuse steps that cannot converge", () => {
    expect(() => new CapacityLearner({ minStep: 0.5, maxStep: 0.2 })).toThrow(RangeError);
    expect(() => new CapacityLearner({ growth: 0.5 })).toThrow(RangeError);
  });
});

describe("approximate ranks modelled as LRU caches", () => {
  it("should bound a declared rank by its KV blocks and shrink it when the engine reports less", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: false, totalKvBlocks: 64 })]);
    const prompts = Array.from({ length: 5 }, (_, i) => prompt(100 + i, 16 * BS, i));
    for (const [i, p] of prompts.entries()) {
      const r = await f.router.route({ requestId: `r${i}`, tokens: p, model: "m" });
      if (r.kind === "routed") r.handle.finish();
    }
    // 80 blocks routed, 61 kept (95% of 64: answers take the rest): the first prompt, least recently routed, is gone,
    // the second lost its three deepest blocks, the last three are held in full.
    expect((await f.router.query({ requestId: "q0", tokens: prompts[0]!, model: "m" })).cachedTokens).toBe(0);
    expect((await f.router.query({ requestId: "q1", tokens: prompts[1]!, model: "m" })).cachedTokens).toBe(13 * BS);
    expect((await f.router.query({ requestId: "q2", tokens: prompts[2]!, model: "m" })).cachedTokens).toBe(16 * BS);
    expect(f.router.snapshot().predictions).toEqual([]);
    // The engine keeps reporting nothing where the model predicts a whole prompt: its real cache is smaller.
    for (let i = 0; i < 6; i++) f.router.reportUsage({ worker: "a", dpRank: 0, predictedTokens: 16 * BS, reportedTokens: 0, promptTokens: 16 * BS });
    const p = f.router.snapshot().predictions.find((x) => x.worker === "a")!;
    expect(p.capacityBlocks).toBeLessThan(48);
    expect(p.ttlMs).toBe(3_600_000);
    // The model dropped the oldest prompts to fit: the newest is still predicted, the second oldest no longer.
    expect((await f.router.query({ requestId: "q3", tokens: prompts[1]!, model: "m" })).cachedTokens).toBe(0);
    expect((await f.router.query({ requestId: "q4", tokens: prompts[4]!, model: "m" })).cachedTokens).toBe(16 * BS);
  });

  it("should bound the rank again after a core trap rebuilt the index without capacities", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: false, totalKvBlocks: 64 })]);
    const routeAll = async (base: number) => {
      const ps = Array.from({ length: 5 }, (_, i) => prompt(base + i, 16 * BS, base + i));
      for (const [i, p] of ps.entries()) {
        const r = await f.router.route({ requestId: `r${base}-${i}`, tokens: p, model: "m" });
        if (r.kind === "routed") r.handle.finish();
      }
      return ps;
    };
    await routeAll(300);
    expect(() => hooks.induceTrap(f.index)).toThrow();
    const ps = await routeAll(400);
    // 61 blocks of the 80 routed since the rebuild: the oldest prompt is gone again.
    expect((await f.router.query({ requestId: "q0", tokens: ps[0]!, model: "m" })).cachedTokens).toBe(0);
    expect(hooks.treeSize(f.index, "a")).toBe(61);
  });

  it("should keep a running request's prompt in the model, as its engine cannot evict it, and age it once freed", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: false, totalKvBlocks: 64 })]);
    const running = prompt(500, 16 * BS, 500);
    const r = await f.router.route({ requestId: "long", tokens: running, model: "m" });
    if (r.kind !== "routed") throw new Error(r.kind);
    const others = Array.from({ length: 4 }, (_, i) => prompt(600 + i, 16 * BS, 600 + i));
    const refreshed: number[] = [];
    for (const [i, p] of others.entries()) {
      f.clock.advance(1_000);
      refreshed.push(f.router.tick().approxBlocksRefreshed);
      const o = await f.router.route({ requestId: `other-${i}`, tokens: p, model: "m" });
      if (o.kind === "routed") o.handle.finish();
    }
    // Recorded again once half of the model's 61 blocks had turned over since it was routed (32 blocks later).
    expect(refreshed).toEqual([0, 0, 16, 0]);
    // 80 blocks routed, 61 kept: routed first, the running prompt would be the first to go; recorded again while it
    // runs, it stays, and the oldest finished prompt goes in its place.
    expect((await f.router.query({ requestId: "q0", tokens: running, model: "m" })).cachedTokens).toBe(16 * BS);
    expect((await f.router.query({ requestId: "q1", tokens: others[0]!, model: "m" })).cachedTokens).toBe(0);
    // Once freed it ages like any prompt: four more prompts of 16 blocks push it out.
    r.handle.finish();
    const later = Array.from({ length: 4 }, (_, i) => prompt(700 + i, 16 * BS, 700 + i));
    for (const [i, p] of later.entries()) {
      f.clock.advance(1_000);
      expect(f.router.tick().approxBlocksRefreshed).toBe(0);
      const o = await f.router.route({ requestId: `after-${i}`, tokens: p, model: "m" });
      if (o.kind === "routed") o.handle.finish();
    }
    expect((await f.router.query({ requestId: "q2", tokens: running, model: "m" })).cachedTokens).toBe(0);
  });

  it("should record a running prompt again after half its lifetime on a rank bounded by TTL only", async () => {
    const f = await fixture({ closedLoop: false, approxTtlMs: 10_000 }, [worker("a", { kvEvents: false })]);
    const r = await f.router.route({ requestId: "long", tokens: prompt(500, 16 * BS, 500), model: "m" });
    expect(r.kind).toBe("routed");
    f.clock.advance(4_999);
    expect(f.router.tick().approxBlocksRefreshed).toBe(0);
    f.clock.advance(1);
    expect(f.router.tick().approxBlocksRefreshed).toBe(16);
    f.clock.advance(4_999);
    expect(f.router.tick().approxBlocksRefreshed).toBe(0);
    // Kept alive past its first lifetime: still held 14 s after it was routed.
    f.clock.advance(4_001);
    expect(f.router.tick().approxBlocksRefreshed).toBe(16);
    expect(hooks.treeSize(f.index, "a")).toBe(16);
  });

  it("should keep a peer replica's running prompt in the model as it keeps its own, until the peer frees it", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: false, totalKvBlocks: 64 })]);
    const running = prompt(500, 16 * BS, 500);
    await f.router.query({ requestId: "hash", tokens: running, model: "m" });
    const words = new Uint32Array(32);
    expect(f.index.lastSequenceWordsInto(words)).toBe(16);
    // The peer's decision (replica sync's decision message), then its booking with the prompt's hashes.
    expect(f.router.recordPeerRoute("a", 0, words)).toBe(true);
    const stop = f.router.trackPeerInflight("a", 0, words, 16)!;
    const refreshed: number[] = [];
    for (let i = 0; i < 4; i++) {
      f.clock.advance(1_000);
      refreshed.push(f.router.tick().approxBlocksRefreshed);
      const o = await f.router.route({ requestId: `other-${i}`, tokens: prompt(600 + i, 16 * BS, 600 + i), model: "m" });
      if (o.kind === "routed") o.handle.finish();
    }
    expect(refreshed).toEqual([0, 0, 16, 0]);
    expect((await f.router.query({ requestId: "q0", tokens: running, model: "m" })).cachedTokens).toBe(16 * BS);
    // Freed by the peer: it ages like any prompt.
    stop();
    for (let i = 0; i < 4; i++) {
      f.clock.advance(1_000);
      expect(f.router.tick().approxBlocksRefreshed).toBe(0);
      const o = await f.router.route({ requestId: `after-${i}`, tokens: prompt(700 + i, 16 * BS, 700 + i), model: "m" });
      if (o.kind === "routed") o.handle.finish();
    }
    expect((await f.router.query({ requestId: "q1", tokens: running, model: "m" })).cachedTokens).toBe(0);
  });

  it("should count a peer's decisions in how far a rank's model has turned over", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: false, totalKvBlocks: 64 })]);
    const r = await f.router.route({ requestId: "long", tokens: prompt(500, 16 * BS, 500), model: "m" });
    expect(r.kind).toBe("routed");
    const words = new Uint32Array(32);
    for (const [i, n] of [[0, 0], [1, 16]] as const) {
      await f.router.query({ requestId: `h${i}`, tokens: prompt(800 + i, 16 * BS, 800 + i), model: "m" });
      f.index.lastSequenceWordsInto(words);
      expect(f.router.recordPeerRoute("a", 0, words)).toBe(true);
      // 16 blocks of peers' decisions since the local prompt was recorded: under half of 61; 32: over.
      f.clock.advance(1_000);
      expect(f.router.tick().approxBlocksRefreshed).toBe(n);
    }
  });

  it("should leave a peer's decision to the KV events of a rank that has them, and ignore an unknown rank", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: true, totalKvBlocks: 64 })]);
    await f.router.query({ requestId: "hash", tokens: prompt(500, 16 * BS, 500), model: "m" });
    const words = new Uint32Array(32);
    f.index.lastSequenceWordsInto(words);
    expect(f.router.recordPeerRoute("a", 0, words)).toBe(false);
    expect(f.router.recordPeerRoute("zz", 0, words)).toBe(false);
    expect(f.router.recordPeerRoute("a", 3, words)).toBe(false);
    expect(f.router.trackPeerInflight("zz", 0, words, 16)).toBeUndefined();
    const stop = f.router.trackPeerInflight("a", 0, words, 16)!;
    f.clock.advance(5_000);
    expect(f.router.tick().approxBlocksRefreshed).toBe(0);
    stop();
    expect(hooks.treeSize(f.index, "a")).toBe(0);
  });

  it("should not record in-flight prompts again on a rank that has KV events", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: true, totalKvBlocks: 64 })]);
    const r = await f.router.route({ requestId: "long", tokens: prompt(500, 16 * BS, 500), model: "m" });
    expect(r.kind).toBe("routed");
    f.clock.advance(5_000);
    expect(f.router.tick().approxBlocksRefreshed).toBe(0);
    expect(hooks.treeSize(f.index, "a")).toBe(0);
  });

  it("should leave the model unbounded with the closed loop off", async () => {
    const f = await fixture({ closedLoop: false }, [worker("a", { kvEvents: false, totalKvBlocks: 64 })]);
    const prompts = Array.from({ length: 5 }, (_, i) => prompt(200 + i, 16 * BS, i));
    for (const [i, p] of prompts.entries()) {
      const r = await f.router.route({ requestId: `r${i}`, tokens: p, model: "m" });
      if (r.kind === "routed") r.handle.finish();
    }
    expect((await f.router.query({ requestId: "q0", tokens: prompts[0]!, model: "m" })).cachedTokens).toBe(16 * BS);
  });
});
