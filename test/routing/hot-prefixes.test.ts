/** Hot-prefix spreading: k follows a prefix's share of booked work, and the router serves it from exactly k workers. */
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/routing/clock.ts";
import { HotPrefixes, pickSpreadSet } from "../../src/routing/hot-prefixes.ts";
import { rankKeyOf } from "../../src/routing/tie-break.ts";
import { BS, fixture, prompt, worker } from "./helpers.ts";

/** Books `count` requests in the ratio of `shares` (prefix key → weight), 10 blocks each, one per ms. */
function feed(h: HotPrefixes, clock: ManualClock, shares: Record<number, number>, count: number): void {
  const keys = Object.entries(shares).flatMap(([k, w]) => Array<number>(w).fill(Number(k)));
  for (let i = 0; i < count; i++) {
    clock.advance(1);
    h.observe(keys[i % keys.length]!, 10);
  }
}

describe("HotPrefixes", () => {
  it("gives a prefix as many workers as its share of the work needs, none before it has enough requests", () => {
    const clock = new ManualClock(0);
    const h = new HotPrefixes(clock.now);
    feed(h, clock, { 1: 1 }, 5);
    expect(h.workersFor(1, 4)).toBe(4); // 5 requests: not yet hot, no restriction
    const g = new HotPrefixes(clock.now);
    feed(g, clock, { 1: 12, 2: 3, 3: 3, 4: 2 }, 400);
    // share 0.6 of 4 workers at 0.8 of a worker each: 3; 0.15: 1; 0.1: 1.
    expect(g.workersFor(1, 4)).toBe(3);
    expect(g.workersFor(2, 4)).toBe(1);
    expect(g.workersFor(3, 4)).toBe(1);
    expect(g.workersFor(99, 4)).toBe(4); // never seen
    expect(g.workersFor(1, 8)).toBe(6);
    expect(g.spreadCount()).toBe(1);
  });

  it("shrinks one worker at a time once the share has fallen a quarter worker below the smaller count", () => {
    const clock = new ManualClock(0);
    const h = new HotPrefixes(clock.now, { halfLifeMs: 1_000 });
    feed(h, clock, { 1: 6, 2: 1, 3: 1, 4: 1, 5: 1 }, 2_000);
    expect(h.workersFor(1, 4)).toBe(3);
    // Prefix 1 cools to a tenth of the work: k comes down to 1, one worker at a time.
    const seen: number[] = [];
    for (let round = 0; round < 40; round++) {
      feed(h, clock, { 1: 1, 2: 3, 3: 3, 4: 3 }, 200);
      seen.push(h.workersFor(1, 4));
    }
    expect(seen.at(-1)).toBe(1);
    for (let i = 1; i < seen.length; i++) expect(seen[i - 1]! - seen[i]!).toBeLessThanOrEqual(1);
    expect(seen.filter((k) => k === 2).length).toBeGreaterThan(0);
  });

  it("keeps at most maxEntries prefixes", () => {
    const clock = new ManualClock(0);
    const h = new HotPrefixes(clock.now, { maxEntries: 64 });
    for (let i = 0; i < 10_000; i++) {
      clock.advance(1);
      h.observe(i, 1);
    }
    expect(h.size).toBeLessThanOrEqual(64);
    h.observe(5, 1);
    expect(h.size).toBeLessThanOrEqual(64);
  });
});

describe("pickSpreadSet", () => {
  const ids = ["w0", "w1", "w2", "w3", "w4", "w5"];
  function pick(order: string[], k: number, held: Set<string>, lo: number, hi: number): string[] {
    const out = new Int32Array(order.length), weights = new Float64Array(order.length);
    const heldCol = Float64Array.from(order, (w) => (held.has(w) ? 1 : 0));
    const n = pickSpreadSet(order.length, k, lo, hi, heldCol, 0, order.map((w) => rankKeyOf(w, 0)), out, weights);
    return Array.from(out.subarray(0, n), (i) => order[i]!).sort();
  }

  it("takes the workers holding the prefix first and fills up by rendezvous, whatever the candidate order", () => {
    const held = new Set(["w4"]);
    const a = pick(ids, 3, held, 0x1234, 0x5678);
    expect(a).toContain("w4");
    expect(a).toHaveLength(3);
    expect(pick([...ids].reverse(), 3, held, 0x1234, 0x5678)).toEqual(a);
    expect(pick(ids, 2, new Set(["w1", "w2", "w3"]), 0x1234, 0x5678).every((w) => ["w1", "w2", "w3"].includes(w))).toBe(true);
  });

  it("picks the same set by sorting when k is large as by insertion when it is small", () => {
    const many = Array.from({ length: 40 }, (_, i) => `w${i}`);
    const held = new Set(["w3", "w17", "w31"]);
    for (const k of [1, 5, 8, 9, 20, 32, 33, 39]) {
      const got = pick(many, k, held, 0xabcdef, 0x123);
      expect(got).toHaveLength(k);
      expect(new Set(got).size).toBe(k);
      if (k >= held.size) for (const h of held) expect(got).toContain(h);
      else for (const w of got) expect(held.has(w)).toBe(true);
      // Every set is the top of one ranking: a larger k only adds workers.
      expect(pick(many, k + 1, held, 0xabcdef, 0x123)).toEqual(expect.arrayContaining(got));
    }
  });

  it("spreads different prefixes over different workers", () => {
    const firsts = new Set<string>();
    for (let p = 0; p < 64; p++) firsts.add(pick(ids, 1, new Set(), Math.imul(p + 1, 0x9e3779b1) >>> 0, p)[0]!);
    expect(firsts.size).toBe(ids.length);
  });
});

describe("router with hot-prefix spreading", () => {
  /**
   * Half the requests share one system prompt (2 blocks), the rest come from 12 other families (3 blocks each); every
   * booking stays in flight, so load alone would send the hot prefix to every worker in turn.
   */
  async function workersOfHotPrefix(hotPrefixSpread: boolean): Promise<{ hot: Set<string>; all: Set<string> }> {
    const f = await fixture({ hotPrefixSpread, queueThreshold: null }, ["a", "b", "c", "d"].map((w) => worker(w)));
    const hot = new Set<string>(), all = new Set<string>();
    for (let i = 0; i < 240; i++) {
      f.clock.advance(10);
      const isHot = i % 2 === 0;
      const tokens = prompt(isHot ? 1 : 2 + (i % 12), 6 * BS, i, isHot ? 2 * BS : 3 * BS);
      const r = await f.router.route({ requestId: `r${i}`, tokens, model: "m" });
      if (r.kind !== "routed") throw new Error(r.kind);
      if (isHot && i >= 80) hot.add(r.signals.worker);
      all.add(r.signals.worker);
    }
    return { hot, all };
  }

  it("serves a prefix with half of the work from k = 3 of 4 workers once it is hot", async () => {
    const on = await workersOfHotPrefix(true);
    expect(on.hot.size).toBe(3);
    expect(on.all.size).toBe(4);
  });

  it("lets the prefix reach every worker when off (the reference behaviour)", async () => {
    const off = await workersOfHotPrefix(false);
    expect(off.hot.size).toBe(4);
  });

  it("does not move a session bound elsewhere", async () => {
    const f = await fixture({ queueThreshold: null }, ["a", "b", "c", "d"].map((w) => worker(w)));
    for (let i = 0; i < 200; i++) {
      f.clock.advance(10);
      const r = await f.router.route({ requestId: `r${i}`, tokens: prompt(i % 2 === 0 ? 1 : 2 + (i % 12), 6 * BS, i, 2 * BS), model: "m" });
      if (r.kind === "routed") r.handle.finish();
    }
    const workers = new Set<string>();
    for (let t = 0; t < 4; t++) {
      const r = await f.router.route({ requestId: `s${t}`, tokens: prompt(1, 6 * BS, 900 + t, 2 * BS), model: "m", sessionId: "sess", target: t === 0 ? { worker: "d" } : undefined });
      if (r.kind !== "routed") throw new Error(r.kind);
      workers.add(r.signals.worker);
      r.handle.finish();
    }
    expect([...workers]).toEqual(["d"]);
  });
});

describe("hot-prefix spreading's valve", () => {
  it("keeps a prefix on its worker while that is not far dearer, and leaves it when it is", async () => {
    const f = await fixture({ queueThreshold: null }, ["a", "b", "c", "d"].map((w) => worker(w)));
    const hotOn = new Set<string>();
    // A fifth of the work: k = 1, its holder.
    for (let i = 0; i < 200; i++) {
      f.clock.advance(10);
      const isHot = i % 5 === 0;
      const r = await f.router.route({ requestId: `r${i}`, tokens: prompt(isHot ? 1 : 2 + (i % 40), 6 * BS, i, 2 * BS), model: "m" });
      if (r.kind !== "routed") throw new Error(r.kind);
      if (isHot && i >= 100) hotOn.add(r.signals.worker);
      r.handle.finish();
    }
    expect(hotOn.size).toBe(1);
    const [owner] = [...hotOn];
    // Its worker takes a long queue of prefill: the next request of the prefix goes elsewhere.
    for (let j = 0; j < 6; j++) {
      const r = await f.router.route({ requestId: `big${j}`, tokens: prompt(500 + j, 64 * BS, j), model: "m", target: { worker: owner! } });
      expect(r.kind).toBe("routed");
    }
    const next = await f.router.route({ requestId: "after", tokens: prompt(1, 6 * BS, 999, 2 * BS), model: "m" });
    expect(next.kind === "routed" && next.signals.worker).not.toBe(owner);
  });
});
