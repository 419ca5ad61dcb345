import { describe, expect, it } from "vitest";
import { ActivePrompts, commonPrefix } from "../../src/routing/active-prompts.ts";
import { InflightPrefixes } from "../../src/routing/inflight-prefixes.ts";
import { createPrng, randomInt } from "../../src/routing/prng.ts";
import { queueKey } from "../../src/routing/queue-policy.ts";
import { resolveConfig } from "../../src/routing/router-config.ts";
import { chainKeys as chain, fixture, prompt, worker, distinctBlocks } from "./helpers.ts";

describe("prng", () => {
  it("is reproducible per seed, differs across seeds, and stays in [0, 1)", () => {
    const a = createPrng(123), b = createPrng(123), c = createPrng(124);
    const xs = Array.from({ length: 1000 }, () => a());
    expect(Array.from({ length: 1000 }, () => b())).toEqual(xs);
    expect(Array.from({ length: 1000 }, () => c())).not.toEqual(xs);
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
    const buckets = new Array(10).fill(0);
    const r = createPrng(0);
    for (let i = 0; i < 100_000; i++) buckets[randomInt(r, 10)]++;
    for (const n of buckets) expect(Math.abs(n - 10_000)).toBeLessThan(600);
  });
});

describe("active prompts", () => {
  it("matches a set-of-blocks model under random adds and removes, duplicates included", () => {
    const rand = createPrng(5);
    const prompts = new ActivePrompts();
    const inflight = new InflightPrefixes(1);
    const live: { keys: Uint32Array; n: number }[] = [];
    for (let step = 0; step < 3000; step++) {
      if (live.length === 0 || rand() < 0.55) {
        const n = randomInt(rand, 40);
        const p = rand() < 0.1 && live.length > 0 ? live[randomInt(rand, live.length)]! // an identical prompt again
          : { keys: chain(randomInt(rand, 4), step, n, randomInt(rand, n + 1)), n };
        // Before adding, its shared prefix must equal the deepest block the model already holds.
        const model = new Set(live.flatMap((q) => keyList(q.keys, q.n)));
        let depth = 0;
        while (depth < p.n && model.has(`${p.keys[2 * depth]}:${p.keys[2 * depth + 1]}`)) depth++;
        inflight.query(p.keys, p.n);
        expect(inflight.sharedOf(0)).toBe(depth);
        prompts.add(p.keys, p.n);
        inflight.add(p.keys, p.n, 0);
        live.push(p);
      } else {
        const p = live.splice(randomInt(rand, live.length), 1)[0]!;
        expect(prompts.remove(p.keys, p.n)).toBe(true);
        expect(inflight.remove(p.keys, p.n)).toBe(true);
      }
      expect(prompts.distinctBlocks).toBe(new Set(live.flatMap((q) => keyList(q.keys, q.n))).size);
      expect(prompts.size).toBe(live.filter((q) => q.n > 0).length);
    }
    for (const p of live) prompts.remove(p.keys, p.n);
    expect([prompts.distinctBlocks, prompts.size]).toEqual([0, 0]);
    expect(prompts.remove(chain(1, 1, 5, 0), 5)).toBe(false);
  });

  it("finds common prefixes by binary search", () => {
    const a = chain(1, 1, 50, 20), b = chain(1, 2, 30, 20);
    expect(commonPrefix(a, 50, b, 30)).toBe(20);
    expect(commonPrefix(a, 50, a, 10)).toBe(10);
    expect(commonPrefix(a, 50, chain(2, 3, 50, 50), 50)).toBe(0);
  });
});

function keyList(keys: Uint32Array, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${keys[2 * i]}:${keys[2 * i + 1]}`);
}

describe("active sequences through the router", () => {
  it("counts shared prompt blocks once per worker and frees exactly once", async () => {
    // Prefill as the reference books it: the shared blocks count for both requests (see inflight-cached.test.ts).
    const f = await fixture({ inflightCached: false }, [worker("a")]);
    const p1 = prompt(1, 320, 1, 160), p2 = prompt(1, 320, 2, 160); // 10 shared blocks, 10 unique each
    const o1 = await f.router.route({ requestId: "1", tokens: p1, model: "m" });
    const o2 = await f.router.route({ requestId: "2", tokens: p2, model: "m" });
    if (o1.kind !== "routed" || o2.kind !== "routed") throw new Error("not routed");
    expect(o2.signals.potentialDecodeBlocks).toBe(20 + 10); // 20 active + 20 new − 10 shared with the live request
    const rank = () => f.router.snapshot().ranks[0]!;
    expect(rank().activeBlocks).toBe(distinctBlocks(f.index, [p1, p2]));
    expect(rank().activeBlocks).toBe(30);
    expect(rank().activePrefillTokens).toBe(640);
    expect(o1.handle.firstToken()).toBe(true);
    expect(o1.handle.firstToken()).toBe(false);
    expect(rank().activePrefillTokens).toBe(320);
    expect(o1.handle.finish()).toBe(true);
    expect(o1.handle.fail()).toBe(false);
    expect(f.router.release("1")).toBe(false);
    expect(rank()).toMatchObject({ activeBlocks: 20, activePrefillTokens: 320, activeRequests: 1 });
    expect(f.router.release("2", "failed")).toBe(true);
    expect(rank()).toMatchObject({ activeBlocks: 0, activePrefillTokens: 0, activeRequests: 0 });
    expect(f.freed.map((x) => [x.requestId, x.reason])).toEqual([["1", "finished"], ["2", "failed"]]);
  });

  it("sums blocks without dedupe when KV reuse is not assumed", async () => {
    const f = await fixture({ assumeKvReuse: false }, [worker("a")]);
    for (const u of [1, 2]) await f.router.route({ requestId: `${u}`, tokens: prompt(1, 320, u, 160), model: "m" });
    expect(f.router.snapshot().ranks[0]!.activeBlocks).toBe(40);
  });

  it("expires bookings older than 300 s, and a late finish is a no-op", async () => {
    const f = await fixture({}, [worker("a")]);
    const old = await f.router.route({ requestId: "old", tokens: prompt(1, 64, 1), model: "m" });
    f.clock.advance(200_000);
    await f.router.route({ requestId: "young", tokens: prompt(2, 64, 2), model: "m" });
    f.clock.advance(99_999);
    expect(f.router.tick().expiredBookings).toBe(0);
    f.clock.advance(1);
    expect(f.router.tick().expiredBookings).toBe(1);
    expect(old.kind === "routed" && [old.handle.active, old.handle.endedBy, old.handle.finish()]).toEqual([false, "expired", false]);
    expect(f.router.liveBookings).toBe(1);
    // The booking path looks for stale bookings too (at most every 30 s), without waiting for a tick.
    f.clock.advance(300_000);
    await f.router.route({ requestId: "later", tokens: prompt(3, 64, 3), model: "m" });
    expect(f.router.liveBookings).toBe(1);
    expect(f.freed.map((x) => x.requestId)).toEqual(["old", "young"]);
  });

  it("refuses a second booking for a live request id", async () => {
    const f = await fixture({}, [worker("a")]);
    await f.router.route({ requestId: "r", tokens: prompt(1, 64, 1), model: "m" });
    await expect(f.router.route({ requestId: "r", tokens: prompt(1, 64, 1), model: "m" })).rejects.toMatchObject({ code: "KVGATE_ERR_BAD_ARGUMENT" });
    expect(f.router.liveBookings).toBe(1);
  });
});

describe("config and queue keys", () => {
  it("validates configuration", () => {
    expect(() => resolveConfig({ queuePolicy: "sjf" as never })).toThrow(/queue policy/);
    expect(() => resolveConfig({ overlapWeight: -1 })).toThrow(/overlapWeight/);
    expect(() => resolveConfig({ sessionHeader: "X Session" })).toThrow(/header/);
    expect(resolveConfig().staleBookingMs).toBe(300_000);
  });

  it("orders by policy", () => {
    const early = { arrivalSec: 1, priority: 0, uncachedTokens: 500 }, late = { arrivalSec: 5, priority: 0, uncachedTokens: 100 };
    expect(queueKey("fcfs", early)).toBeGreaterThan(queueKey("fcfs", late));
    expect(queueKey("lcfs", late)).toBeGreaterThan(queueKey("lcfs", early));
    expect(queueKey("wspt", late)).toBeGreaterThan(queueKey("wspt", early));
    expect(queueKey("fcfs", { ...late, priority: 10 })).toBeGreaterThan(queueKey("fcfs", early));
  });
});
