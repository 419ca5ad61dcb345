import { describe, expect, it } from "vitest";
import type { RoutePlan } from "../../src/routing/two-phase.ts";
import type { PlanOutcome } from "../../src/routing/two-phase.ts";
import { cache, fixture, prompt, worker } from "./helpers.ts";

function planOf(o: PlanOutcome): RoutePlan {
  if (o.kind !== "planned") throw new Error(`expected planned, got ${o.kind}`);
  return o.plan;
}

async function twoWorkers(config: Parameters<typeof fixture>[0] = {}) {
  const f = await fixture(config, [worker("a", { totalKvBlocks: 500 }), worker("b", { totalKvBlocks: 800 })]);
  const tokens = prompt(1, 160, 1);
  cache(f.index, "a", 0, tokens, 6);
  return { f, tokens, req: { requestId: "r1", tokens, model: "m" } };
}

describe("preview → plan → dispatch", () => {
  it("previews without booking, plans the previewed worker, dispatches a live handle", async () => {
    const { f, tokens, req } = await twoWorkers();
    const preview = await f.router.preview(req);
    expect(preview.signals).toMatchObject({
      worker: "a", dpRank: 0, overlapBlocks: 6, cachedTokens: 96, potentialDecodeBlocks: 10, totalKvBlocks: 500, cost: 4 + 10,
    });
    expect(preview.budget.deadline).toBe(f.clock.now() + f.router.config.cleanupTimeoutMs);
    expect(f.router.liveBookings).toBe(0);
    // Even if b becomes the better choice meanwhile, the plan books what was previewed.
    cache(f.index, "b", 0, tokens, 10);
    const plan = planOf(await f.router.plan(req, preview));
    expect([plan.signals.worker, plan.signals.via, plan.state]).toEqual(["a", "plan", "planned"]);
    expect(plan.budget).toBe(preview.budget);
    expect(f.router.snapshot()).toMatchObject({ liveBookings: 1, openPlans: 1 });
    const handle = f.router.dispatch(req, plan);
    expect([plan.state, handle.worker, handle.endpoint]).toEqual(["dispatched", "a", "http://a"]);
    expect(f.router.snapshot().openPlans).toBe(0);
    expect(() => f.router.dispatch(req, plan)).toThrow(/already dispatched/);
    expect(handle.finish()).toBe(true);
    expect(handle.finish()).toBe(false);
    expect(f.router.liveBookings).toBe(0);
  });

  it("rejects a plan or dispatch for another request id", async () => {
    const { f, req } = await twoWorkers();
    const preview = await f.router.preview(req);
    await expect(f.router.plan({ ...req, requestId: "other" }, preview)).rejects.toMatchObject({ code: "KVGATE_ERR_PLAN_MISMATCH", status: 409 });
    await expect(f.router.plan({ ...req, phase: "decode" }, preview)).rejects.toMatchObject({ code: "KVGATE_ERR_PLAN_MISMATCH" });
    expect(f.router.liveBookings).toBe(0);
    const plan = planOf(await f.router.plan(req, preview));
    expect(() => f.router.dispatch({ ...req, requestId: "other" }, plan)).toThrow(expect.objectContaining({ code: "KVGATE_ERR_PLAN_MISMATCH" }));
    expect(plan.state).toBe("planned");
    await expect(f.router.plan({ ...req, target: { worker: "b" } }, preview)).rejects.toMatchObject({ code: "KVGATE_ERR_PLAN_MISMATCH" });
  });

  it("one cleanup deadline: too late to plan, and an undispatched plan is released when it passes", async () => {
    const { f, req } = await twoWorkers({ cleanupTimeoutMs: 5000 });
    const late = await f.router.preview(req);
    f.clock.advance(5000);
    await expect(f.router.plan(req, late)).rejects.toMatchObject({ code: "KVGATE_ERR_DEADLINE_EXCEEDED", status: 504 });

    const preview = await f.router.preview(req);
    f.clock.advance(3000);
    const plan = planOf(await f.router.plan(req, preview));
    f.clock.advance(1999);
    expect(f.router.tick().expiredPlans).toBe(0);
    f.clock.advance(1);
    expect(f.router.tick().expiredPlans).toBe(1);
    expect([plan.state, plan.endedBy, f.router.liveBookings]).toEqual(["released", "plan_expired", 0]);
    expect(() => f.router.dispatch(req, plan)).toThrow(expect.objectContaining({ code: "KVGATE_ERR_DEADLINE_EXCEEDED" }));

    // Dispatch at the deadline without an intervening tick releases too.
    const p2 = planOf(await f.router.plan({ ...req, requestId: "r2" }, { ...(await f.router.preview({ ...req, requestId: "r2" })) }));
    f.clock.advance(5000);
    expect(() => f.router.dispatch({ ...req, requestId: "r2" }, p2)).toThrow(expect.objectContaining({ code: "KVGATE_ERR_DEADLINE_EXCEEDED" }));
    expect(f.router.liveBookings).toBe(0);
  });

  it("cancelling releases what was booked, by call or by abort signal", async () => {
    const { f, req } = await twoWorkers();
    const plan = planOf(await f.router.plan(req, await f.router.preview(req)));
    expect(f.router.cancelPlan(plan)).toBe(true);
    expect(f.router.cancelPlan(plan)).toBe(false);
    expect([plan.state, plan.endedBy, f.router.liveBookings]).toEqual(["released", "cancelled", 0]);
    expect(() => f.router.dispatch(req, plan)).toThrow(expect.objectContaining({ code: "KVGATE_ERR_CANCELLED" }));

    const ac = new AbortController();
    const withSignal = { ...req, requestId: "r2", signal: ac.signal };
    const p2 = planOf(await f.router.plan(withSignal, await f.router.preview(withSignal)));
    expect(f.router.liveBookings).toBe(1);
    ac.abort();
    expect([p2.state, f.router.liveBookings]).toEqual(["released", 0]);
    expect(f.freed.map((x) => x.reason)).toEqual(["cancelled", "cancelled"]);
  });

  it("a removed worker fails the plan step, or releases an existing plan", async () => {
    const { f, req } = await twoWorkers();
    const preview = await f.router.preview(req);
    const plan = planOf(await f.router.plan(req, preview));
    f.router.removeWorker("a");
    expect([plan.state, plan.endedBy]).toEqual(["released", "worker_removed"]);
    expect(() => f.router.dispatch(req, plan)).toThrow(expect.objectContaining({ code: "KVGATE_ERR_NO_WORKERS" }));
    await expect(f.router.plan({ ...req, requestId: "r9" }, { ...preview, requestId: "r9" })).rejects.toMatchObject({ code: "KVGATE_ERR_NO_WORKERS" });
  });

  it("binds a first session request at dispatch, not at plan; a cancelled plan gives the session up", async () => {
    const { f, req } = await twoWorkers();
    const sreq = { ...req, sessionId: "S" };
    const plan = planOf(await f.router.plan(sreq, await f.router.preview(sreq)));
    expect(f.router.session("S")).toMatchObject({ initializing: true, leases: 1 });
    f.router.dispatch(sreq, plan);
    expect(f.router.session("S")).toMatchObject({ initializing: false, target: { worker: "a" }, leases: 1 });

    const t2 = { ...req, requestId: "t2", sessionId: "T" };
    const p2 = planOf(await f.router.plan(t2, await f.router.preview(t2)));
    f.router.cancelPlan(p2);
    expect(f.router.session("T")).toBeUndefined();
  });
});

describe("prefill busy probe", () => {
  it("answers whether the chosen prefill worker is loaded above t × its batch capacity", async () => {
    const f = await fixture({ queueThreshold: null }, [
      worker("p1", { role: "prefill", maxBatchedTokens: 1000 }), worker("p2", { role: "prefill", maxBatchedTokens: 1000 }), worker("d", { role: "decode" }),
    ]);
    const req = { requestId: "x", tokens: prompt(1, 160, 1), model: "m" };
    expect(await f.router.prefillBusy(req, 0.5)).toMatchObject({ busy: false, reason: "idle", activePrefillTokens: 0, capacity: 1000 });
    for (const [id, w] of [["l1", "p1"], ["l2", "p2"]] as const) {
      await f.router.route({ requestId: id, tokens: prompt(9, 640, id.length + (w === "p2" ? 7 : 3)), model: "m", phase: "prefill", target: { worker: w } });
    }
    expect(await f.router.prefillBusy(req, 0.5)).toMatchObject({ busy: true, reason: "load", activePrefillTokens: 640 });
    expect(await f.router.prefillBusy(req, 0.7)).toMatchObject({ busy: false, reason: "idle" });
    expect(f.router.liveBookings).toBe(2);
    f.router.setBusyThresholds({ activePrefillTokens: 600 });
    expect(await f.router.prefillBusy(req, 0.9)).toEqual({ busy: true, reason: "all_busy" });
  });

  it("counts a saturated pool (requests would queue) as busy", async () => {
    const f = await fixture({ queueThreshold: 0.5 }, [worker("p", { role: "prefill", maxBatchedTokens: 1000 })]);
    await f.router.route({ requestId: "l", tokens: prompt(9, 640, 9), model: "m", phase: "prefill" });
    expect(await f.router.prefillBusy({ requestId: "x", tokens: prompt(1, 64, 1), model: "m" }, 10)).toEqual({ busy: true, reason: "saturated" });
  });
});
