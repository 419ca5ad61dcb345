import { describe, expect, it } from "vitest";
import type { RequestHandle } from "../../src/routing/request-handle.ts";
import type { QueuePolicy } from "../../src/routing/router-config.ts";
import { queueRejectedError, type RouteOutcome } from "../../src/routing/router.ts";
import { cache, fixture, prompt, worker } from "./helpers.ts";

/** One worker that parks requests once more than 100 prefill tokens are in flight (threshold 1 × 100 batched tokens). */
async function saturatedFixture(policy: QueuePolicy, extra: Parameters<typeof fixture>[0] = {}) {
  const f = await fixture({ queueThreshold: 1, queuePolicy: policy, ...extra }, [worker("w", { maxBatchedTokens: 100 })]);
  const blocker = await f.router.route({ requestId: "blocker", tokens: prompt(99, 200, 99), model: "m" });
  if (blocker.kind !== "routed") throw new Error("blocker not routed");
  return { ...f, blocker: blocker.handle };
}

function handleOf(o: RouteOutcome): RequestHandle {
  if (o.kind !== "routed") throw new Error(`expected routed, got ${o.kind}`);
  return o.handle;
}

/** Enqueues the requests one second apart, then lets them in one at a time by completing each admitted prefill. */
async function admissionOrder(f: Awaited<ReturnType<typeof saturatedFixture>>, reqs: { id: string; len: number; priority?: number }[]) {
  const order: string[] = [];
  const pending = reqs.map((r, i) => {
    if (i > 0) f.clock.advance(1000);
    return f.router.route({ requestId: r.id, tokens: prompt(i + 1, r.len, i + 1), model: "m", priority: r.priority }).then((o) => {
      order.push(r.id);
      return handleOf(o);
    });
  });
  expect(f.router.queueDepth).toBe(reqs.length);
  f.blocker.firstToken();
  for (let i = 0; i < reqs.length; i++) {
    await Promise.resolve();
    await Promise.resolve();
    const h = f.router.handleOf(order[i]!);
    expect(h, `admitted #${i}`).toBeDefined();
    expect(f.router.queueDepth).toBe(reqs.length - i - 1);
    h!.firstToken();
  }
  await Promise.all(pending);
  return order;
}

describe("admission queue policies", () => {
  const reqs = [{ id: "A", len: 128 }, { id: "B", len: 144 }, { id: "C", len: 112 }];

  it("FCFS admits in arrival order", async () => {
    expect(await admissionOrder(await saturatedFixture("fcfs"), reqs)).toEqual(["A", "B", "C"]);
  });

  it("FCFS priority moves a request ahead by that many seconds", async () => {
    const order = await admissionOrder(await saturatedFixture("fcfs"), [reqs[0]!, reqs[1]!, { ...reqs[2]!, priority: 5 }]);
    expect(order).toEqual(["C", "A", "B"]);
  });

  it("LCFS admits the newest first", async () => {
    expect(await admissionOrder(await saturatedFixture("lcfs"), reqs)).toEqual(["C", "B", "A"]);
  });

  it("WSPT admits the least uncached work first, counting cache hits", async () => {
    const longer = [{ id: "A", len: 160 }, { id: "B", len: 176 }, { id: "C", len: 144 }];
    expect(await admissionOrder(await saturatedFixture("wspt"), longer)).toEqual(["C", "A", "B"]);
    const f = await saturatedFixture("wspt");
    cache(f.index, "w", 0, prompt(2, 176, 2), 3); // B: 176 tokens, 48 cached → 128 uncached, less than C's 144
    expect(await admissionOrder(f, longer)).toEqual(["B", "C", "A"]);
  });

  it("reports the time spent queued", async () => {
    const f = await saturatedFixture("fcfs");
    const p = f.router.route({ requestId: "q", tokens: prompt(1, 64, 1), model: "m" });
    f.clock.advance(2500);
    f.blocker.finish();
    const out = await p;
    expect(out.kind === "routed" && out.signals.timings.queueMs).toBe(2500);
  });
});

describe("queue limits and cancellation", () => {
  it("rejects beyond the length limit with a typed outcome (429, Retry-After)", async () => {
    const f = await saturatedFixture("fcfs", { queueMaxLength: 2, retryAfterMs: 750 });
    const parked = [1, 2].map((i) => f.router.route({ requestId: `p${i}`, tokens: prompt(i, 64, i), model: "m" }));
    const out = await f.router.route({ requestId: "p3", tokens: prompt(3, 64, 3), model: "m" });
    expect(out).toEqual({ kind: "queue_rejected", rejection: { limit: "length", current: 2, max: 2, retryAfterMs: 750 } });
    if (out.kind !== "queue_rejected") throw new Error("unreachable");
    expect(queueRejectedError(out.rejection)).toMatchObject({ code: "KVGATE_ERR_QUEUE_REJECTED", status: 429, detail: { retryAfterMs: 750 } });
    f.blocker.finish();
    expect((await Promise.all(parked)).map((o) => o.kind)).toEqual(["routed", "routed"]);
  });

  it("rejects requests that waited past the limit at the next tick", async () => {
    const f = await saturatedFixture("fcfs", { queueMaxWaitMs: 5000 });
    const p = f.router.route({ requestId: "slow", tokens: prompt(1, 64, 1), model: "m" });
    f.clock.advance(4999);
    f.router.tick();
    expect(f.router.queueDepth).toBe(1);
    f.clock.advance(1);
    expect(f.router.tick().queueExpired).toBe(1);
    expect(await p).toEqual({ kind: "queue_rejected", rejection: { limit: "wait", current: 5000, max: 5000, retryAfterMs: 1000 } });
    expect(f.router.liveBookings).toBe(1);
  });

  it("a cancelled request leaves the queue and is never booked", async () => {
    const f = await saturatedFixture("fcfs");
    const ac = new AbortController();
    const cancelled = f.router.route({ requestId: "gone", tokens: prompt(1, 64, 1), model: "m", signal: ac.signal });
    const kept = f.router.route({ requestId: "kept", tokens: prompt(2, 64, 2), model: "m" });
    ac.abort();
    await expect(cancelled).rejects.toMatchObject({ code: "KVGATE_ERR_CANCELLED" });
    expect(f.router.queueDepth).toBe(1);
    f.blocker.finish();
    expect((await kept).kind).toBe("routed");
    expect(f.booked.map((b) => b.requestId)).toEqual(["blocker", "kept"]);
  });

  it("never parks when the worker does not report max batched tokens", async () => {
    const f = await fixture({ queueThreshold: 1 }, [worker("w")]);
    for (let i = 0; i < 20; i++) expect((await f.router.route({ requestId: `r${i}`, tokens: prompt(i, 2000, i), model: "m" })).kind).toBe("routed");
    expect(f.router.queueDepth).toBe(0);
  });

  it("fails a queued request whose pinned worker was removed while it waited", async () => {
    const f = await fixture({ queueThreshold: 1 }, [worker("w", { maxBatchedTokens: 100 }), worker("v", { maxBatchedTokens: 100 })]);
    handleOf(await f.router.route({ requestId: "bw", tokens: prompt(90, 200, 90), model: "m", target: { worker: "w" } }));
    handleOf(await f.router.route({ requestId: "bv", tokens: prompt(91, 200, 91), model: "m", target: { worker: "v" } }));
    const p = f.router.route({ requestId: "pin", tokens: prompt(1, 64, 1), model: "m", target: { worker: "w" } });
    expect(f.router.queueDepth).toBe(1);
    expect(f.router.removeWorker("w")).toBe(1);
    await expect(p).rejects.toMatchObject({ code: "KVGATE_ERR_UNKNOWN_WORKER" });
    expect(f.router.queueDepth).toBe(0);
  });
});

describe("busy thresholds", () => {
  it("steers around busy workers and answers 503 only when every worker is busy", async () => {
    const f = await fixture({ busy: { activePrefillTokens: 100 } }, [worker("a"), worker("b")]);
    const tokens = prompt(1, 160, 1);
    cache(f.index, "a", 0, tokens, 10);
    handleOf(await f.router.route({ requestId: "la", tokens: prompt(7, 200, 7), model: "m", target: { worker: "a" } }));
    const out = await f.router.route({ requestId: "r", tokens, model: "m" });
    expect(out.kind === "routed" && out.signals.worker).toBe("b"); // a holds the cache but is busy
    // r put 160 uncached prefill tokens on b: now both are over 100.
    await expect(f.router.route({ requestId: "x", tokens, model: "m" })).rejects.toMatchObject({ code: "KVGATE_ERR_ALL_WORKERS_BUSY", status: 503 });
    f.router.setBusyThresholds({});
    expect((await f.router.route({ requestId: "x", tokens, model: "m" })).kind).toBe("routed");
  });

  it("counts a data-parallel worker busy only when all its ranks are", async () => {
    const f = await fixture({ busy: { activeDecodeBlocksFrac: 0.5 } }, [worker("dp", { dpSize: 2, totalKvBlocks: 20 })]);
    handleOf(await f.router.route({ requestId: "r0", tokens: prompt(1, 176, 1), model: "m", target: { worker: "dp", dpRank: 0 } }));
    const out = await f.router.route({ requestId: "r", tokens: prompt(2, 32, 2), model: "m" });
    expect(out.kind === "routed" && out.signals.dpRank).toBe(1);
    handleOf(await f.router.route({ requestId: "r1", tokens: prompt(3, 176, 3), model: "m", target: { worker: "dp", dpRank: 1 } }));
    await expect(f.router.route({ requestId: "x", tokens: prompt(4, 32, 4), model: "m" })).rejects.toMatchObject({ code: "KVGATE_ERR_ALL_WORKERS_BUSY" });
  });
});

describe("busy thresholds count other replicas' bookings", () => {
  it("a worker that peers filled with prefill is busy, and routable again once their load is gone", async () => {
    const f = await fixture({ busy: { activePrefillTokens: 100 } }, [worker("a"), worker("b")]);
    const tokens = prompt(1, 160, 1);
    cache(f.index, "a", 0, tokens, 10);
    // 120 remote prefill tokens on a still cost less than b's 160 uncached ones, so only the busy check moves it.
    f.router.setRemoteLoad("a", 0, { requests: 2, prefillTokens: 120, blocks: 0 });
    const out = await f.router.route({ requestId: "r", tokens, model: "m" });
    expect(out.kind === "routed" && out.signals.worker).toBe("b"); // a holds the cache, but the peers' prefill makes it busy
    f.router.setRemoteLoad("a", 0, { requests: 0, prefillTokens: 0, blocks: 0 });
    const again = await f.router.route({ requestId: "r2", tokens, model: "m" });
    expect(again.kind === "routed" && again.signals.worker).toBe("a");
  });

  it("remote decode blocks count against the decode-blocks threshold", async () => {
    const f = await fixture({ busy: { activeDecodeBlocksFrac: 0.5 } }, [worker("a", { totalKvBlocks: 20 }), worker("b", { totalKvBlocks: 20 })]);
    f.router.setRemoteLoad("a", 0, { requests: 1, prefillTokens: 0, blocks: 11 });
    f.router.setRemoteLoad("b", 0, { requests: 1, prefillTokens: 0, blocks: 11 });
    await expect(f.router.route({ requestId: "x", tokens: prompt(4, 32, 4), model: "m" })).rejects.toMatchObject({ code: "KVGATE_ERR_ALL_WORKERS_BUSY", status: 503 });
    f.router.setRemoteLoad("b", 0, { requests: 1, prefillTokens: 0, blocks: 9 });
    const out = await f.router.route({ requestId: "y", tokens: prompt(4, 32, 4), model: "m" });
    expect(out.kind === "routed" && out.signals.worker).toBe("b");
  });

  it("peers' prefill saturates a worker: the request waits in the queue until their load drains", async () => {
    const f = await fixture({ queueThreshold: 1 }, [worker("w", { maxBatchedTokens: 100 })]);
    f.router.setRemoteLoad("w", 0, { requests: 1, prefillTokens: 150, blocks: 0 });
    let settled = false;
    const p = f.router.route({ requestId: "q", tokens: prompt(2, 64, 2), model: "m" }).then((o) => { settled = true; return o; });
    await Promise.resolve();
    expect(f.router.queueDepth).toBe(1);
    expect(settled).toBe(false);
    f.router.setRemoteLoad("w", 0, { requests: 0, prefillTokens: 0, blocks: 0 });
    expect((await p).kind).toBe("routed");
    expect(f.router.queueDepth).toBe(0);
  });
});
