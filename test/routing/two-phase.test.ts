/**
 * Two-phase routing at the router: commit books as route() does and names the booking by a plan id; first token,
 * complete and cancel report on it; an unreported plan is freed at its TTL; open plans are capped.
 */
import { describe, expect, it } from "vitest";
import type { CommitOutcome } from "../../src/routing/router.ts";
import type { PlanView } from "../../src/routing/two-phase.ts";
import { cache, fixture, prompt, worker } from "./helpers.ts";

function planOf(o: CommitOutcome): PlanView {
  if (o.kind !== "committed") throw new Error(`expected committed, got ${o.kind}`);
  return o.plan;
}

async function twoWorkers(config: Parameters<typeof fixture>[0] = {}) {
  const f = await fixture(config, [worker("a", { totalKvBlocks: 500 }), worker("b", { totalKvBlocks: 800 })]);
  const tokens = prompt(1, 160, 1);
  cache(f.index, "a", 0, tokens, 6);
  return { f, tokens, req: { requestId: "r1", tokens, model: "m" } };
}

const load = (f: Awaited<ReturnType<typeof fixture>>, w: string) => {
  const r = f.router.snapshot().ranks.find((x) => x.worker === w)!;
  return [r.activeRequests, r.activePrefillTokens, r.activeBlocks];
};

describe("commit → first token → complete", () => {
  it("books like route(), moves prefill to decode at the first token, frees at complete", async () => {
    const { f, req } = await twoWorkers({ planTtlMs: 10_000 });
    const o = await f.router.commit(req, "p1");
    const plan = planOf(o);
    expect(o.kind === "committed" && o.signals).toMatchObject({ worker: "a", overlapBlocks: 6, cachedTokens: 96, via: "scored" });
    expect(plan).toEqual({ id: "p1", requestId: "r1", worker: "a", dpRank: 0, state: "prefill", expiresAt: f.clock.now() + 10_000 });
    expect(load(f, "a")).toEqual([1, 64, 10]);
    expect(f.router.snapshot().openPlans).toBe(1);
    expect(f.router.planFirstToken("p1").state).toBe("decode");
    expect(f.router.planFirstToken("p1").state).toBe("decode");
    expect(load(f, "a")).toEqual([1, 0, 10]);
    expect(f.router.planEnd("p1", "finished")).toMatchObject({ id: "p1", state: "decode" });
    expect(load(f, "a")).toEqual([0, 0, 0]);
    expect(f.router.snapshot()).toMatchObject({ liveBookings: 0, openPlans: 0 });
    expect(() => f.router.planFirstToken("p1")).toThrow(expect.objectContaining({ code: "KVGATE_ERR_PLAN_NOT_FOUND", status: 404 }));
    expect(() => f.router.planEnd("p1", "finished")).toThrow(expect.objectContaining({ code: "KVGATE_ERR_PLAN_NOT_FOUND" }));
    expect(f.freed.map((x) => x.reason)).toEqual(["finished"]);
  });

  it("frees at complete without a first token, and at cancel", async () => {
    const { f, req } = await twoWorkers();
    planOf(await f.router.commit(req, "p1"));
    f.router.planEnd("p1", "finished");
    planOf(await f.router.commit({ ...req, requestId: "r2" }, "p2"));
    expect(f.router.planEnd("p2", "cancelled").state).toBe("prefill");
    expect(f.freed.map((x) => x.reason)).toEqual(["finished", "cancelled"]);
    expect(load(f, "a")).toEqual([0, 0, 0]);
  });

  it("frees an unreported plan when its TTL passes, on the injected clock, and reports why it closed", async () => {
    const { f, req } = await twoWorkers({ planTtlMs: 5000 });
    planOf(await f.router.commit(req, "p1"));
    f.clock.advance(2000);
    planOf(await f.router.commit({ ...req, requestId: "r2" }, "p2"));
    f.router.planFirstToken("p2");
    f.clock.advance(2999);
    expect(f.router.tick().expiredPlans).toBe(0);
    f.clock.advance(1);
    expect(f.router.tick().expiredPlans).toBe(1);
    expect(f.router.planOf("p1")).toBeUndefined();
    expect(f.router.planOf("p2")).toMatchObject({ state: "decode" });
    f.clock.advance(2000);
    expect(f.router.tick().expiredPlans).toBe(1);
    expect(f.freed.map((x) => [x.requestId, x.reason])).toEqual([["r1", "plan_expired"], ["r2", "plan_expired"]]);
    expect([f.router.liveBookings, ...load(f, "a")]).toEqual([0, 0, 0, 0]);
  });

  it("closes the plan when its booking goes another way (worker removed)", async () => {
    const { f, req } = await twoWorkers();
    planOf(await f.router.commit(req, "p1"));
    f.router.removeWorker("a");
    expect(f.router.snapshot().openPlans).toBe(0);
    expect(() => f.router.planEnd("p1", "finished")).toThrow(expect.objectContaining({ code: "KVGATE_ERR_PLAN_NOT_FOUND" }));
  });

  it("caps open plans (commits still being admitted count) and refuses a plan id in use", async () => {
    const { f, req } = await twoWorkers({ maxOpenPlans: 2 });
    planOf(await f.router.commit(req, "p1"));
    await expect(f.router.commit({ ...req, requestId: "r2" }, "p1")).rejects.toMatchObject({ code: "KVGATE_ERR_BAD_ARGUMENT" });
    const second = f.router.commit({ ...req, requestId: "r2" }, "p2");
    await expect(f.router.commit({ ...req, requestId: "r3" }, "p3")).rejects.toMatchObject({ code: "KVGATE_ERR_PLAN_LIMIT", status: 503 });
    planOf(await second);
    expect(f.router.liveBookings).toBe(2);
    f.router.planEnd("p1", "cancelled");
    planOf(await f.router.commit({ ...req, requestId: "r3" }, "p3"));
    // A failed commit gives its place back.
    f.router.planEnd("p2", "cancelled");
    await expect(f.router.commit({ ...req, requestId: "r4", model: "nope" }, "p4")).rejects.toMatchObject({ code: "KVGATE_ERR_NO_WORKERS" });
    planOf(await f.router.commit({ ...req, requestId: "r5" }, "p5"));
  });

  it("binds a first session request at commit, as route() does", async () => {
    const { f, req } = await twoWorkers();
    planOf(await f.router.commit({ ...req, sessionId: "S" }, "p1"));
    expect(f.router.session("S")).toMatchObject({ initializing: false, target: { worker: "a" }, leases: 1 });
    f.router.planEnd("p1", "finished");
    expect(f.router.session("S")).toMatchObject({ leases: 0 });
  });

  it("waits in the admission queue like route(); a queue rejection gives its place under the cap back", async () => {
    const f = await fixture({ queueThreshold: 0.5, queueMaxLength: 1, queueMaxWaitMs: 1000, maxOpenPlans: 2 }, [worker("a", { maxBatchedTokens: 100 })]);
    const req = (id: string) => ({ requestId: id, tokens: prompt(3, 160, id.length), model: "m" });
    planOf(await f.router.commit(req("r1"), "p1"));
    const rejected = f.router.commit(req("r22"), "p2");
    expect(f.router.queueDepth).toBe(1);
    await expect(f.router.commit(req("r333"), "p3")).rejects.toMatchObject({ code: "KVGATE_ERR_PLAN_LIMIT" });
    f.clock.advance(1000);
    f.router.tick();
    expect(await rejected).toMatchObject({ kind: "queue_rejected", rejection: { limit: "wait" } });
    const queued = f.router.commit(req("r333"), "p3");
    expect(f.router.queueDepth).toBe(1);
    f.router.planFirstToken("p1");
    expect(planOf(await queued)).toMatchObject({ id: "p3", worker: "a", state: "prefill" });
    expect(f.router.snapshot()).toMatchObject({ openPlans: 2, liveBookings: 2, queueDepth: 0 });
  });
});
