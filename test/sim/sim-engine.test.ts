import { describe, it, expect } from "vitest";
import { decodeMs, prefillMs } from "../../src/sim/perf-model.ts";
import { fillerToken } from "../../src/sim/sim-tokenizer.ts";
import { wasmBlockHasher } from "../../src/sim/block-hasher.ts";
import { VirtualClock, type SimClock } from "../../src/sim/sim-clock.ts";
import { SimEngine } from "../../src/sim/sim-engine.ts";
import { drain, hashIndex, range, simFixture } from "./helpers.ts";

describe("SimEngine timing (virtual clock)", () => {
  it("should take the mocker's prefill polynomial to the first token and the decode polynomial per token", async () => {
    const f = await simFixture({ numGpuBlocks: 64 });
    const [r] = await drain(f, [f.engine.submit({ prompt: range(0, 100), maxTokens: 3 })]);
    expect(r!.reason).toBe("length");
    expect(r!.completionTokens).toBe(3);
    expect(r!.tokens).toEqual([0, 1, 2].map(fillerToken));
    expect(r!.firstTokenAt! - r!.arrival).toBeCloseTo(prefillMs(100), 9);
    // Each decode step computes one token with 101 then 102 tokens of KV: 7 of 64 blocks in use.
    expect(r!.finishedAt - r!.firstTokenAt!).toBeCloseTo(2 * decodeMs(7 / 64), 9);
  });

  it("should divide step times by the speed-up factors", async () => {
    const f = await simFixture({ numGpuBlocks: 64, speedupRatio: 10, decodeSpeedupRatio: 2 });
    const [r] = await drain(f, [f.engine.submit({ prompt: range(0, 100), maxTokens: 2 })]);
    expect(r!.firstTokenAt! - r!.arrival).toBeCloseTo(prefillMs(100) / 10, 9);
    expect(r!.finishedAt - r!.firstTokenAt!).toBeCloseTo(decodeMs(7 / 64) / 20, 9);
  });

  it("should split a long prompt into chunks of maxNumBatchedTokens (chunked prefill)", async () => {
    const f = await simFixture({ numGpuBlocks: 64, maxNumBatchedTokens: 64 });
    const [r] = await drain(f, [f.engine.submit({ prompt: range(0, 200), maxTokens: 1 })]);
    expect(f.engine.steps).toBe(4);
    expect(r!.firstTokenAt! - r!.arrival).toBeCloseTo(3 * prefillMs(64) + prefillMs(8), 9);
  });

  it("should batch decodes of concurrent requests in one step (continuous batching)", async () => {
    const f = await simFixture({ numGpuBlocks: 64 });
    const tokens: { id: string; at: number }[] = [];
    const a = f.engine.submit({ prompt: range(0, 20), maxTokens: 4 }, { onToken: (_t, _i, at) => tokens.push({ id: "a", at }) });
    const b = f.engine.submit({ prompt: range(100, 20), maxTokens: 4 }, { onToken: (_t, _i, at) => tokens.push({ id: "b", at }) });
    await drain(f, [a, b]);
    expect(f.engine.steps).toBe(4);
    const at = (id: string) => tokens.filter((t) => t.id === id).map((t) => t.at);
    expect(at("a")).toEqual(at("b"));
  });

  it("should keep requests beyond maxNumSeqs waiting until a slot frees", async () => {
    const f = await simFixture({ numGpuBlocks: 64, maxNumSeqs: 2 });
    const hs = [0, 1, 2].map((k) => f.engine.submit({ prompt: range(k * 1000, 20), maxTokens: 3 }));
    f.clock.advance(0);
    expect([f.engine.running, f.engine.waiting]).toEqual([2, 1]);
    const [a, b, c] = await drain(f, hs);
    expect(c!.firstTokenAt!).toBeGreaterThan(Math.min(a!.finishedAt, b!.finishedAt));
  });
});

describe("SimEngine on a clock whose timers fire late", () => {
  it("should keep simulated time exact and catch up instead of paying the lateness on every step", async () => {
    const inner = new VirtualClock();
    // Every timer fires 1 ms late, like setTimeout on a real event loop with sub-millisecond steps.
    const late: SimClock = { epochMs: 0, now: () => inner.now(), setTimer: (d, fn) => inner.setTimer(d + 1, fn) };
    const engine = new SimEngine({ numGpuBlocks: 64, speedupRatio: 100 }, { hasher: wasmBlockHasher(await hashIndex(), 16), clock: late });
    const h = engine.submit({ prompt: range(0, 100), maxTokens: 200 });
    inner.runUntilIdle();
    const r = await h.result;
    const decode = decodeMs(7 / 64) / 100;
    expect(r.firstTokenAt! - r.arrival).toBeCloseTo(1 + prefillMs(100) / 100, 9);
    expect(r.finishedAt - r.firstTokenAt!).toBeGreaterThan(199 * decode * 0.9);
    expect(r.finishedAt - r.firstTokenAt!).toBeLessThan(199 * decodeMs(14 / 64) / 100);
    // Paying 1 ms per step would end ~199 ms late; catching up leaves at most one timer's lateness.
    expect(inner.now() - r.finishedAt).toBeLessThanOrEqual(1);
  });
});

describe("SimEngine KV cache behaviour", () => {
  it("should report cached tokens equal to the whole blocks it reused", async () => {
    const f = await simFixture({ numGpuBlocks: 64 });
    const [first] = await drain(f, [f.engine.submit({ prompt: range(0, 100), maxTokens: 2 })]);
    const [second] = await drain(f, [f.engine.submit({ prompt: range(0, 100), maxTokens: 2 })]);
    const [exact] = await drain(f, [f.engine.submit({ prompt: range(0, 96), maxTokens: 2 })]);
    const [other] = await drain(f, [f.engine.submit({ prompt: [...range(0, 40), ...range(9000, 60)], maxTokens: 2 })]);
    expect(first!.cachedTokens).toBe(0);
    expect(second!.cachedTokens).toBe(96);
    expect(exact!.cachedTokens).toBe(80); // a fully cached prompt recomputes its last block
    expect(other!.cachedTokens).toBe(32);
    expect(f.metrics().hits).toBe(96 + 80 + 32);
  });

  it("should make a request wait for KV blocks rather than overcommit", async () => {
    const f = await simFixture({ numGpuBlocks: 10 });
    const a = f.engine.submit({ prompt: range(0, 120), maxTokens: 8 });
    const b = f.engine.submit({ prompt: range(1000, 120), maxTokens: 8 });
    f.clock.advance(0);
    expect([f.engine.running, f.engine.waiting]).toEqual([1, 1]);
    const [ra, rb] = await drain(f, [a, b]);
    expect(rb!.firstTokenAt!).toBeGreaterThan(ra!.finishedAt);
    expect(f.metrics().preemptions).toBe(0);
  });

  it("should preempt under memory pressure, recompute, and still finish every request correctly", async () => {
    const f = await simFixture({ numGpuBlocks: 10 });
    const hs = [0, 1].map((k) => f.engine.submit({ prompt: range(k * 1000, 64), maxTokens: 60 }));
    const rs = await drain(f, hs);
    expect(f.metrics().preemptions).toBeGreaterThan(0);
    expect(rs[1]!.preemptions).toBeGreaterThan(0);
    for (const r of rs) {
      expect(r.reason).toBe("length");
      expect(r.tokens).toEqual(range(0, 60).map(fillerToken));
    }
    expect(f.engine.cache.usedBlocks).toBe(0);
    expect(f.engine.cache.audit()).toEqual([]);
  });

  it("should free an aborted request's blocks at once, running or waiting", async () => {
    const f = await simFixture({ numGpuBlocks: 64, maxNumSeqs: 1 });
    const a = f.engine.submit({ prompt: range(0, 100), maxTokens: 50 });
    const b = f.engine.submit({ prompt: range(1000, 100), maxTokens: 50 });
    f.clock.advance(prefillMs(100) + 0.001);
    expect(f.engine.cache.usedBlocks).toBe(7);
    a.abort();
    expect(f.engine.cache.usedBlocks).toBe(0);
    b.abort();
    const [ra, rb] = await Promise.all([a.result, b.result]);
    expect(ra).toMatchObject({ reason: "abort", completionTokens: 1 });
    expect(rb).toMatchObject({ reason: "abort", completionTokens: 0, cachedTokens: 0 });
    expect(f.engine.idle).toBe(true);
    f.clock.runUntilIdle();
    expect(f.engine.cache.usedBlocks).toBe(0);
    expect(f.engine.cache.cachedBlocks).toBe(6); // a's full prompt blocks stay reusable
  });
});

describe("SimEngine requests", () => {
  it("should reject requests it can never serve with status 400", async () => {
    const f = await simFixture({ numGpuBlocks: 4, maxModelLen: 128 });
    const err = (fn: () => unknown) => {
      try {
        fn();
      } catch (e) {
        return { code: (e as { code: string }).code, status: (e as { status: number }).status };
      }
      return undefined;
    };
    expect(err(() => f.engine.submit({ prompt: [], maxTokens: 1 }))).toEqual({ code: "KVGATE_ERR_BAD_ARGUMENT", status: 400 });
    expect(err(() => f.engine.submit({ prompt: range(0, 100), maxTokens: 40 }))).toEqual({ code: "KVGATE_ERR_PROMPT_TOO_LONG", status: 400 });
    expect(err(() => f.engine.submit({ prompt: range(0, 64), maxTokens: 2 }))).toEqual({ code: "KVGATE_ERR_PROMPT_TOO_LONG", status: 400 });
    expect(err(() => f.engine.submit({ prompt: [1, -2], maxTokens: 2 }))).toEqual({ code: "KVGATE_ERR_BAD_ARGUMENT", status: 400 });
    expect(err(() => f.engine.submit({ prompt: [1], maxTokens: 0 }))).toEqual({ code: "KVGATE_ERR_BAD_ARGUMENT", status: 400 });
    f.engine.submit({ id: "x", prompt: [1], maxTokens: 2 });
    expect(err(() => f.engine.submit({ id: "x", prompt: [1], maxTokens: 2 }))).toEqual({ code: "KVGATE_ERR_BAD_ARGUMENT", status: 400 });
  });

  it("should keep running when a listener throws, and abort live requests on close", async () => {
    const f = await simFixture({ numGpuBlocks: 64 });
    const a = f.engine.submit({ prompt: range(0, 20), maxTokens: 3 }, { onToken: () => { throw new Error("boom"); } });
    const [ra] = await drain(f, [a]);
    expect(ra!.completionTokens).toBe(3);
    const b = f.engine.submit({ prompt: range(0, 20), maxTokens: 30 });
    f.clock.advance(100);
    await f.engine.close();
    expect((await b.result).reason).toBe("abort");
    expect(f.engine.cache.usedBlocks).toBe(0);
    expect(() => f.engine.submit({ prompt: [1], maxTokens: 1 })).toThrow(expect.objectContaining({ code: "KVGATE_ERR_STATE" }));
  });
});
