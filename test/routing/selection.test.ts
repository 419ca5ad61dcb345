import { describe, expect, it } from "vitest";
import { KvgateError } from "../../src/core/errors.ts";
import { createPrng } from "../../src/routing/prng.ts";
import { LoadTable } from "../../src/routing/load-table.ts";
import { RankLoad } from "../../src/routing/rank-load.ts";
import { Selector, type InflightOverlap } from "../../src/routing/selector.ts";
import { rankKeyOf } from "../../src/routing/tie-break.ts";
import type { RankState, WorkerEntry } from "../../src/routing/worker-registry.ts";
import { BS, cache, fixture, prompt, smallIndex, worker } from "./helpers.ts";
import * as hooks from "../support/kv-index-hooks.ts";

/**
 * A rank's load with `decode` active blocks and one live request (a booking of that many blocks, summed), and
 * in-flight overlaps per slot, to feed the selector the reference example's inputs (which no real booking set produces).
 */
function fixedLoad(table: LoadTable, slot: number, decode: number): RankLoad {
  const load = new RankLoad(false, table, slot);
  load.book(0, decode, 0, undefined);
  return load;
}

class FixedInflight implements InflightOverlap {
  readonly bySlot = new Map<number, number>();
  credited = new Int32Array(0);
  creditedCount = 0;
  query(): void {
    this.credited = Int32Array.from([...this.bySlot.keys()].filter((s) => this.bySlot.get(s)! > 0));
    this.creditedCount = this.credited.length;
  }
  sharedOf(slot: number): number {
    return this.bySlot.get(slot) ?? 0;
  }
}

async function routed(f: Awaited<ReturnType<typeof fixture>>, req: Parameters<typeof f.router.route>[0]) {
  const out = await f.router.route(req);
  if (out.kind !== "routed") throw new Error(`expected routed, got ${out.kind}`);
  return out;
}

describe("worked example (reference §4.1: costs 18 / 10 / 11, the second worker wins)", () => {
  it("joins index overlaps 2/5/8 with in-flight overlap 0/5/1 and picks the cost-10 worker", async () => {
    const index = await smallIndex();
    const tokens = prompt(1, 160, 1);
    const entry = (id: string): WorkerEntry => ({
      id, endpoint: id, models: ["m"], adapters: [], loadsAdapters: false, role: "aggregated", blockSize: BS, kvEvents: true, eagle: false, health: "healthy", ranks: [], registered: true,
    });
    const inflight = new FixedInflight();
    const table = new LoadTable(index.options.maxSlots);
    const ranks: RankState[] = [["w1", 2, 0], ["w2", 5, 5], ["w3", 8, 1]].map(([id, cached, activeOverlap]) => {
      cache(index, id as string, 0, tokens, cached as number);
      const slot = index.slotFor(id as string, 0);
      inflight.bySlot.set(slot, activeOverlap as number);
      const key = rankKeyOf(id as string, 0);
      table.claim(slot, { key, blockSize: BS, eagle: false, kvEvents: true });
      return { worker: entry(id as string), dpRank: 0, slot, key, load: fixedLoad(table, slot, 0) };
    });
    let t = 0;
    const sel = new Selector(index, table, createPrng(1), () => t++, "kv", inflight);
    const s = sel.select({ requestId: "x", tokens }, {
      candidates: ranks, overlapWeight: 1, temperature: 0, willBook: false, assumeKvReuse: true,
    });
    expect(s.rank.worker.id).toBe("w2");
    expect(s.cost).toBe(10);
    expect(s.overlapBlocks).toBe(5);
    expect(s.bestOverlapBlocks).toBe(8);
    expect(s.cachedTokens).toBe(80);
    expect(s.potentialPrefillTokens).toBe(80);
    expect(s.potentialDecodeBlocks).toBe(5);
    // The other two costs, through targeted (pinned) selection of the same inputs.
    const costOf = (i: number) => sel.select({ requestId: "x", tokens }, {
      candidates: ranks, pinned: ranks[i], overlapWeight: 1, temperature: 0, willBook: false, assumeKvReuse: true,
    }).cost;
    expect([costOf(0), costOf(1), costOf(2)]).toEqual([18, 10, 11]);
  });

  it("with live state: cache picks the deepest overlap until in-flight load on it outweighs the cache", async () => {
    // The reference's weight 1, as in its worked example.
    const f = await fixture({ overlapWeight: 1, newPrefillFactor: 1 }, [worker("w1"), worker("w2"), worker("w3")]);
    const tokens = prompt(1, 160, 1);
    cache(f.index, "w1", 0, tokens, 2);
    cache(f.index, "w2", 0, tokens, 5);
    cache(f.index, "w3", 0, tokens, 8);
    const q = await f.router.query({ requestId: "q", tokens, model: "m" });
    expect([q.worker, q.cost]).toEqual(["w3", 2 + 10]);
    // An unrelated 10-block prompt in flight on w3 adds 10 prefill blocks and 10 decode blocks there: 12 + 20 = 32.
    await routed(f, { requestId: "busy", tokens: prompt(9, 160, 9), model: "m", target: { worker: "w3" } });
    const q2 = await f.router.query({ requestId: "q2", tokens, model: "m" });
    expect([q2.worker, q2.cost]).toEqual(["w2", 5 + 10]);
    const q3 = await f.router.query({ requestId: "q3", tokens, model: "m", target: { worker: "w3" } });
    expect(q3.cost).toBe(32);
  });
});

describe("candidates", () => {
  it("honours role, model and health", async () => {
    const f = await fixture({}, [
      worker("agg"), worker("pre", { role: "prefill" }), worker("other", { models: ["z"] }), worker("sick", { health: "unhealthy" }),
    ]);
    for (let i = 0; i < 6; i++) {
      const s = await f.router.query({ requestId: `q${i}`, tokens: prompt(i, 64, i), model: "m" });
      expect(s.worker).toBe("agg");
    }
    expect((await f.router.query({ requestId: "p", tokens: prompt(1, 64, 1), model: "m", phase: "prefill" })).worker).toBe("pre");
    f.router.drainWorker("agg");
    await expect(f.router.route({ requestId: "r", tokens: prompt(1, 64, 1), model: "m" })).rejects.toMatchObject({ code: "KVGATE_ERR_NO_WORKERS", status: 503 });
    f.router.setWorkerHealth("sick", "healthy");
    expect((await f.router.query({ requestId: "q", tokens: prompt(1, 64, 1), model: "m" })).worker).toBe("sick");
  });

  it("excludes workers (retries) and reports when none remain", async () => {
    const f = await fixture({}, [worker("a"), worker("b")]);
    const tokens = prompt(1, 64, 1);
    cache(f.index, "a", 0, tokens, 4);
    expect((await f.router.query({ requestId: "q", tokens, model: "m" })).worker).toBe("a");
    expect((await f.router.query({ requestId: "q", tokens, model: "m", exclude: ["a"] })).worker).toBe("b");
    await expect(f.router.query({ requestId: "q", tokens, model: "m", exclude: ["a", "b"] })).rejects.toMatchObject({ code: "KVGATE_ERR_NO_WORKERS" });
  });

  it("rejects a block size that disagrees with the model's other workers", async () => {
    const f = await fixture({}, [worker("a")]);
    expect(() => f.router.addWorker(worker("b", { blockSize: 32 }))).toThrow(/block size/);
    expect(() => f.router.addWorker(worker("a"))).toThrow(/already registered/);
  });
});

describe("explicit targeting", () => {
  it("routes to the named worker and rank, skipping scoring but still booking", async () => {
    const f = await fixture({}, [worker("a"), worker("dp", { dpSize: 4 })]);
    const tokens = prompt(1, 64, 1);
    cache(f.index, "a", 0, tokens, 4);
    const out = await routed(f, { requestId: "r", tokens, model: "m", target: { worker: "dp", dpRank: 2 } });
    expect([out.signals.worker, out.signals.dpRank, out.signals.via, out.signals.overlapBlocks]).toEqual(["dp", 2, "target", 0]);
    expect(f.router.snapshot().ranks.find((r) => r.worker === "dp" && r.dpRank === 2)?.activeRequests).toBe(1);
    const single = await routed(f, { requestId: "r2", tokens, model: "m", target: { worker: "a" } });
    expect([single.signals.dpRank, single.signals.overlapBlocks]).toEqual([0, 4]);
  });

  it("fails clearly on an unknown worker, an ambiguous or missing rank, or a conflicting exclusion", async () => {
    const f = await fixture({}, [worker("a"), worker("dp", { dpStart: 4, dpSize: 2 })]);
    const base = { requestId: "r", tokens: prompt(1, 64, 1), model: "m" };
    const err = async (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as KvgateError);
    expect(await err(f.router.route({ ...base, target: { worker: "nope" } }))).toMatchObject({ code: "KVGATE_ERR_UNKNOWN_WORKER", status: 404 });
    const amb = await err(f.router.route({ ...base, target: { worker: "dp" } }));
    expect(amb).toMatchObject({ code: "KVGATE_ERR_BAD_ARGUMENT" });
    expect(amb?.message).toMatch(/2 dp ranks \(4\.\.5\)/);
    expect(await err(f.router.route({ ...base, target: { worker: "dp", dpRank: 0 } }))).toMatchObject({ code: "KVGATE_ERR_BAD_ARGUMENT" });
    expect(await err(f.router.route({ ...base, target: { worker: "a" }, exclude: ["a"] }))).toMatchObject({ code: "KVGATE_ERR_BAD_ARGUMENT" });
    expect(f.router.liveBookings).toBe(0);
  });
});

describe("overrides, query-only and signals", () => {
  it("overlap weight 0 routes on load alone; temperature must be >= 0", async () => {
    const f = await fixture({}, [worker("a"), worker("b")]);
    const tokens = prompt(1, 160, 1);
    cache(f.index, "a", 0, tokens, 10);
    await routed(f, { requestId: "load", tokens: prompt(5, 32, 5), model: "m", target: { worker: "a" } });
    expect((await f.router.query({ requestId: "q", tokens, model: "m" })).worker).toBe("a");
    expect((await f.router.query({ requestId: "q", tokens, model: "m", overrides: { overlapWeight: 0 } })).worker).toBe("b");
    await expect(f.router.route({ requestId: "t", tokens, model: "m", overrides: { temperature: -1 } })).rejects.toMatchObject({ code: "KVGATE_ERR_BAD_ARGUMENT" });
  });

  it("temperature > 0 samples reproducibly from the seeded source", async () => {
    const pick = async () => {
      const f = await fixture({ temperature: 1 }, [worker("a"), worker("b"), worker("c")]);
      const out: string[] = [];
      for (let i = 0; i < 40; i++) out.push((await f.router.query({ requestId: `q${i}`, tokens: prompt(i, 64, i), model: "m" })).worker);
      return out;
    };
    const first = await pick();
    expect(await pick()).toEqual(first);
    expect(new Set(first).size).toBeGreaterThan(1);
  });

  it("query-only books nothing and records nothing, even for approximate workers", async () => {
    const f = await fixture({}, [worker("a", { kvEvents: false }), worker("b", { kvEvents: false })]);
    const tokens = prompt(1, 160, 1);
    const out = await f.router.route({ requestId: "q", tokens, model: "m", queryOnly: true });
    expect(out.kind).toBe("query");
    expect(f.router.liveBookings).toBe(0);
    expect(f.booked).toHaveLength(0);
    expect(hooks.treeSize(f.index, "a") + hooks.treeSize(f.index, "b")).toBe(0);
  });

  it("reports hit rate, cached tokens and timings", async () => {
    const f = await fixture({}, [worker("a")]);
    const tokens = prompt(1, 170, 1);
    cache(f.index, "a", 0, tokens, 4);
    const { signals: s } = await routed(f, { requestId: "r", tokens, model: "m" });
    expect(s).toMatchObject({ requestTokens: 170, promptBlocks: 10, overlapBlocks: 4, cachedTokens: 64, predictedHitRate: 0.4, potentialPrefillTokens: 106 });
    expect(s.timings.hashMatchMs).toBeGreaterThan(0);
    expect(s.timings.scheduleMs).toBeGreaterThan(0);
    expect(s.timings.queueMs).toBe(0);
    expect(f.routed).toHaveLength(1);
  });

  it("breaks a warm cost tie toward the worker with the smallest tree", async () => {
    const f = await fixture({}, [worker("big"), worker("small")]);
    cache(f.index, "big", 0, prompt(50, 320, 50), 20);
    cache(f.index, "small", 0, prompt(51, 32, 51), 2);
    for (let i = 0; i < 10; i++) {
      // Both hold the prompt's first two blocks: equal overlap, equal (zero) load, so equal cost.
      const tokens = prompt(100 + i, 64, i);
      cache(f.index, "big", 0, tokens, 2);
      cache(f.index, "small", 0, tokens, 2);
      const q = await f.router.query({ requestId: `q${i}`, tokens, model: "m" });
      expect([q.worker, q.overlapBlocks]).toEqual(["small", 2]);
    }
  });
});

describe("cold prefixes without coordination (rendezvous on the first block)", () => {
  const ids = ["w0", "w1", "w2", "w3"];

  it("sends each new prefix to the same worker from replicas with other histories and worker orders", async () => {
    const a = await fixture({}, ids.map((id) => worker(id)));
    const b = await fixture({}, [...ids].reverse().map((id) => worker(id)));
    // Replica b has cached other prompts (a different tree everywhere): a warm tie rule would read that.
    for (const [i, id] of ids.entries()) cache(b.index, id, 0, prompt(900 + i, 16 * (i + 1) * 5, 900 + i), 5 * (i + 1));
    const counts = new Map<string, number>();
    for (let i = 0; i < 200; i++) {
      const tokens = prompt(1000 + i, 96, i);
      const qa = await a.router.query({ requestId: `a${i}`, tokens, model: "m" });
      const qb = await b.router.query({ requestId: `b${i}`, tokens, model: "m" });
      expect(qb.worker).toBe(qa.worker);
      expect(qa.overlapBlocks).toBe(0);
      counts.set(qa.worker, (counts.get(qa.worker) ?? 0) + 1);
    }
    // Uniform over the four: each gets a fair share of 200 new prefixes.
    expect([...counts.keys()].sort()).toEqual(ids);
    for (const n of counts.values()) expect(n).toBeGreaterThan(25);
  });

  it("keeps a prompt shorter than one block on the random draw, and a warm prefix on the index", async () => {
    const f = await fixture({}, ids.map((id) => worker(id)));
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) seen.add((await f.router.query({ requestId: `s${i}`, tokens: prompt(7, 8, 7), model: "m" })).worker);
    expect(seen.size).toBeGreaterThan(1);
    const tokens = prompt(3, 96, 3);
    const cold = (await f.router.query({ requestId: "c", tokens, model: "m" })).worker;
    const other = ids.find((id) => id !== cold)!;
    cache(f.index, other, 0, tokens, 3);
    expect((await f.router.query({ requestId: "w", tokens, model: "m" })).worker).toBe(other);
  });
});

describe("a worker whose KV-event view went cold", () => {
  it("scores as caching nothing until it is warm again (a pinned request too)", async () => {
    const f = await fixture({}, [worker("w1"), worker("w2")]);
    const tokens = prompt(5, 160, 5);
    cache(f.index, "w1", 0, tokens, 8);
    const warm = await f.router.query({ requestId: "a", tokens, model: "m" });
    expect([warm.worker, warm.cachedTokens]).toEqual(["w1", 8 * BS]);
    f.router.setCacheCold("w1", true);
    const cold = await f.router.query({ requestId: "b", tokens, model: "m" });
    expect(cold.cachedTokens).toBe(0);
    expect((await f.router.query({ requestId: "c", tokens, model: "m", target: { worker: "w1" } })).cachedTokens).toBe(0);
    f.router.setCacheCold("w1", false);
    expect((await f.router.query({ requestId: "d", tokens, model: "m" })).cachedTokens).toBe(8 * BS);
  });
});

describe("approximate mode is per worker", () => {
  it("records routing decisions only for workers without KV events", async () => {
    const f = await fixture({}, [worker("approx", { kvEvents: false }), worker("precise")]);
    const tokens = prompt(1, 160, 1);
    const first = await routed(f, { requestId: "r1", tokens, model: "m", target: { worker: "approx" } });
    first.handle.finish();
    expect(hooks.treeSize(f.index, "approx")).toBe(10);
    const again = await routed(f, { requestId: "r2", tokens, model: "m" });
    expect([again.signals.worker, again.signals.overlapBlocks]).toEqual(["approx", 10]);
    again.handle.finish();
    await routed(f, { requestId: "r3", tokens: prompt(2, 160, 2), model: "m", target: { worker: "precise" } });
    expect(hooks.treeSize(f.index, "precise")).toBe(0);
    // The recorded prediction expires with the approximate TTL.
    f.clock.advance(f.router.config.approxTtlMs + 1);
    f.router.tick();
    expect(hooks.treeSize(f.index, "approx")).toBe(0);
  });
});
