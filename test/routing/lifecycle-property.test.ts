/**
 * Property test: thousands of random requests through select → book → first token → free, with cancellations,
 * failures, queueing, sessions, two-phase plans, worker removals and clock jumps. After every step the router's bookings and
 * per-rank loads are checked against a model rebuilt from the observed events and the test's own actions.
 */
import { describe, expect, it } from "vitest";
import { KvgateError } from "../../src/core/errors.ts";
import { createPrng, randomInt, type RandomSource } from "../../src/routing/prng.ts";
import type { RequestHandle } from "../../src/routing/request-handle.ts";
import type { RouterConfigInput } from "../../src/routing/router-config.ts";
import type { FreeReason, RouteRequest, WorkerSpec } from "../../src/routing/routing-types.ts";
import { BS, fixture, prompt, smallIndex, worker } from "./helpers.ts";

const STALE_MS = 300_000;
const EXPECTED_ERRORS = new Set([
  "KVGATE_ERR_NO_WORKERS", "KVGATE_ERR_ALL_WORKERS_BUSY", "KVGATE_ERR_CANCELLED", "KVGATE_ERR_UNKNOWN_WORKER",
  "KVGATE_ERR_BAD_ARGUMENT", "KVGATE_ERR_SESSION_CONFLICT",
]);

const FLEET: WorkerSpec[] = [
  worker("a", { maxBatchedTokens: 400, totalKvBlocks: 200 }),
  worker("b", { dpSize: 2, kvEvents: false, maxBatchedTokens: 400 }),
  worker("c", { maxBatchedTokens: 300 }),
  worker("d", { dpStart: 2, dpSize: 2 }),
];

interface ModelBooking {
  requestId: string;
  worker: string;
  dpRank: number;
  seq: bigint[];
  prefill: number;
  /** Decode growth the router should count: no usage is reported here, so it follows max_tokens alone. */
  output: number;
  prefillDone: boolean;
  bookedAt: number;
  handle?: RequestHandle;
  plan?: string;
}

/** What the test is doing right now, so each observed free can be checked against its cause. */
type Cause = { kind: "handle" | "release" | "planEnd"; requestId: string; reason: FreeReason } | { kind: "remove"; worker: string } | { kind: "none" };

interface ScenarioStats {
  booked: number;
  freed: number;
  reasons: Record<string, number>;
  outcomes: Record<string, number>;
  maxQueueDepth: number;
}

async function runScenario(seed: number, steps: number, config: RouterConfigInput): Promise<ScenarioStats> {
  const rand: RandomSource = createPrng(seed);
  // A stream of its own, so adding max_tokens did not reshuffle the scenarios the other draws make.
  const outRand: RandomSource = createPrng(seed ^ 0x5eed);
  const f = await fixture({ queueThreshold: 1, queueMaxLength: 8, queueMaxWaitMs: 20_000, sessionTtlMs: 30_000, planTtlMs: 15_000, ...config },
    FLEET, await smallIndex());
  const { router, clock, index } = f;
  const live = new Map<number, ModelBooking>();
  const byRequest = new Map<string, number>();
  const freedOnce = new Set<number>();
  const tokensOf = new Map<string, Uint32Array>();
  const seqOf = new Map<string, bigint[]>();
  const routedSignals = new Map<string, { cached: number; isl: number }>();
  const reasons: Record<string, number> = {};
  const outcomes: Record<string, number> = {};
  const count = (k: string) => (outcomes[k] = (outcomes[k] ?? 0) + 1);
  let maxQueueDepth = 0;
  const pending = new Set<Promise<unknown>>();
  const aborters: { ac: AbortController; requestId: string }[] = [];
  const aborted = new Set<string>();
  /** Signals of requests still waiting (queue, session): aborting those exercises cancellation paths. */
  const unsettled = new Map<string, AbortController>();
  const expiresAt = new Map<string, number>();
  const plans: { planId: string; bookingId: number }[] = [];
  let cause: Cause = { kind: "none" };
  let bookedTotal = 0;
  let nextId = 0;

  // Observer checks: every booking is new, every free hits a live booking once and has a legitimate cause.
  f.booked.push = (b) => {
    expect(live.has(b.bookingId)).toBe(false);
    const sig = routedSignals.get(b.requestId)!;
    live.set(b.bookingId, {
      requestId: b.requestId, worker: b.worker, dpRank: b.dpRank, seq: seqOf.get(b.requestId)!, prefill: sig.isl - sig.cached,
      output: maxTokensOf.has(b.requestId) ? Math.ceil((sig.isl + maxTokensOf.get(b.requestId)!) / BS) - Math.floor(sig.isl / BS) : 0,
      prefillDone: false, bookedAt: clock.now(),
    });
    byRequest.set(b.requestId, b.bookingId);
    bookedTotal++;
    return 0;
  };
  f.routed.push = (s) => {
    routedSignals.set(s.requestId, { cached: s.cachedTokens, isl: s.requestTokens });
    return 0;
  };
  f.freed.push = (x) => {
    expect(freedOnce.has(x.bookingId), `booking ${x.bookingId} freed twice`).toBe(false);
    const m = live.get(x.bookingId);
    expect(m, `freed unknown booking ${x.bookingId}`).toBeDefined();
    freedOnce.add(x.bookingId);
    reasons[x.reason] = (reasons[x.reason] ?? 0) + 1;
    switch (x.reason) {
      case "expired": expect(clock.now() - m!.bookedAt).toBeGreaterThanOrEqual(STALE_MS); break;
      case "worker_removed": expect(cause).toEqual({ kind: "remove", worker: x.worker }); break;
      case "plan_expired":
        expect(m!.plan, "only a plan expires by its TTL").toBeDefined();
        expect(clock.now()).toBeGreaterThanOrEqual(expiresAt.get(x.requestId)!);
        break;
      default: expect(cause).toMatchObject({ requestId: x.requestId, reason: x.reason });
    }
    live.delete(x.bookingId);
    return 0;
  };

  const expectedError = (e: unknown) => {
    if (!(e instanceof KvgateError) || !EXPECTED_ERRORS.has(e.code)) throw e;
    count(e.code);
  };
  const track = (p: Promise<unknown>) => {
    const t = p.catch(expectedError).finally(() => pending.delete(t));
    pending.add(t);
  };

  const maxTokensOf = new Map<string, number>();
  const newRequest = (): RouteRequest => {
    const id = `r${nextId++}`;
    const family = randomInt(rand, 6);
    const len = 16 + randomInt(rand, 497);
    const tokens = prompt(family, len, nextId, Math.min(len, 32 * (1 + randomInt(rand, 8))));
    tokensOf.set(id, tokens);
    seqOf.set(id, index.hash(tokens, { blockSize: BS }).seq);
    const req: RouteRequest = { requestId: id, tokens, model: "m", priority: rand() < 0.2 ? randomInt(rand, 10) : undefined };
    if (outRand() < 0.5) maxTokensOf.set(id, (req.maxTokens = 1 + randomInt(outRand, 600)));
    const roll = rand();
    if (roll < 0.2) req.sessionId = `s${randomInt(rand, 6)}`;
    else if (roll < 0.27) req.target = { worker: "abcdx"[randomInt(rand, 5)]!, dpRank: rand() < 0.5 ? undefined : randomInt(rand, 4) };
    if (rand() < 0.07) req.exclude = ["abcd"[randomInt(rand, 4)]!];
    if (rand() < 0.1) req.overrides = { overlapWeight: rand() * 2, temperature: rand() < 0.5 ? 0 : rand() };
    if (rand() < 0.15) {
      const ac = new AbortController();
      aborters.push({ ac, requestId: id });
      unsettled.set(id, ac);
      req.signal = ac.signal;
    }
    return req;
  };

  const liveHandles = () => [...live.entries()].filter(([, m]) => m.handle);
  const pick = <T>(xs: readonly T[]): T | undefined => (xs.length === 0 ? undefined : xs[randomInt(rand, xs.length)]);

  const check = () => {
    expect(router.liveBookings).toBe(live.size);
    const perRank = new Map<string, ModelBooking[]>();
    for (const m of live.values()) {
      const k = `${m.worker}/${m.dpRank}`;
      perRank.set(k, [...(perRank.get(k) ?? []), m]);
      if (m.handle) expect(m.handle.active).toBe(true);
    }
    const snap = router.snapshot();
    for (const r of snap.ranks) {
      const ms = perRank.get(`${r.worker}/${r.dpRank}`) ?? [];
      perRank.delete(`${r.worker}/${r.dpRank}`);
      expect(r.activeRequests).toBe(ms.length);
      expect(r.activePrefillTokens).toBe(ms.reduce((s, m) => s + (m.prefillDone ? 0 : m.prefill), 0));
      const blocks = config.assumeKvReuse === false
        ? ms.reduce((s, m) => s + m.seq.length, 0)
        : new Set(ms.flatMap((m) => m.seq)).size;
      expect(r.activeBlocks).toBe(blocks);
      expect(r.expectedOutputBlocks).toBe(ms.reduce((s, m) => s + m.output, 0));
    }
    expect([...perRank.keys()], "bookings left on unregistered workers").toEqual([]);
  };

  const settle = async () => {
    for (let i = 0; i < 6; i++) await Promise.resolve();
  };

  for (let step = 0; step < steps; step++) {
    const op = rand();
    if (op < 0.36) {
      const req = newRequest();
      track(router.route(req).finally(() => unsettled.delete(req.requestId)).then((o) => {
        count(o.kind);
        if (o.kind !== "routed") return;
        const id = byRequest.get(req.requestId)!;
        const m = live.get(id);
        if (m) m.handle = o.handle;
        else expect(o.handle.active).toBe(false); // freed between admission and this continuation
      }));
    } else if (op < 0.5) {
      const [, m] = pick(liveHandles()) ?? [];
      if (m) {
        const first = !m.prefillDone;
        expect(m.handle!.firstToken()).toBe(first);
        m.prefillDone = true;
      }
    } else if (op < 0.68) {
      const entry = pick(liveHandles());
      if (entry) {
        const [, m] = entry;
        const reason = (["finished", "failed", "cancelled"] as const)[randomInt(rand, 3)]!;
        cause = { kind: "handle", requestId: m.requestId, reason };
        const h = m.handle!;
        expect(reason === "finished" ? h.finish() : reason === "failed" ? h.fail() : h.cancel()).toBe(true);
        // A second end, by handle or by id, must not free anything.
        expect(h.finish()).toBe(false);
        expect(router.release(m.requestId)).toBe(false);
        cause = { kind: "none" };
      }
    } else if (op < 0.71) {
      const entry = pick(liveHandles());
      if (entry) {
        cause = { kind: "release", requestId: entry[1].requestId, reason: "finished" };
        expect(router.release(entry[1].requestId)).toBe(true);
        cause = { kind: "none" };
      }
    } else if (op < 0.74) {
      const a = pick([...unsettled.entries()]);
      if (a) {
        aborted.add(a[0]);
        a[1].abort();
      }
    } else if (op < 0.76) {
      const id = pick(router.workerIds());
      if (id) {
        const onIt = [...live.values()].filter((m) => m.worker === id).length;
        cause = { kind: "remove", worker: id };
        expect(router.removeWorker(id)).toBe(onIt);
        cause = { kind: "none" };
      }
    } else if (op < 0.79) {
      const missing = FLEET.filter((w) => !router.workerIds().includes(w.id));
      const w = pick(missing);
      if (w) router.addWorker(w);
    } else if (op < 0.81) {
      const id = pick(router.workerIds());
      if (id) router.setWorkerHealth(id, (["healthy", "draining", "unhealthy", "healthy"] as const)[randomInt(rand, 4)]!);
    } else if (op < 0.87) {
      clock.advance(rand() < 0.8 ? randomInt(rand, 5_000) : 100_000 + randomInt(rand, 300_000));
      if (rand() < 0.5) {
        router.tick();
        for (const m of live.values()) expect(clock.now() - m.bookedAt).toBeLessThan(STALE_MS);
      }
    } else if (op < 0.9) {
      router.tick();
    } else if (op < 0.95) {
      const req = newRequest();
      track(router.commit(req, `P${req.requestId}`).finally(() => unsettled.delete(req.requestId)).then((o) => {
        count(o.kind);
        if (o.kind !== "committed") return;
        const id = byRequest.get(req.requestId)!;
        const m = live.get(id);
        // Freed between the commit and this continuation (its worker removed, say): the plan went with the booking.
        if (!m) {
          expect(router.planOf(o.plan.id)).toBeUndefined();
          return;
        }
        m.plan = o.plan.id;
        expiresAt.set(req.requestId, o.plan.expiresAt);
        plans.push({ planId: o.plan.id, bookingId: id });
      }));
    } else {
      const entry = plans.splice(randomInt(rand, Math.max(plans.length, 1)), 1)[0];
      if (entry) {
        const m = live.get(entry.bookingId);
        const open = router.planOf(entry.planId);
        expect(open === undefined).toBe(m === undefined);
        const roll = rand();
        if (!m) {
          expect(() => router.planEnd(entry.planId, "finished")).toThrow(expect.objectContaining({ code: "KVGATE_ERR_PLAN_NOT_FOUND" }));
        } else if (roll < 0.4) {
          const v = router.planFirstToken(entry.planId);
          expect(v.state).toBe("decode");
          // The report starts the plan's TTL again.
          expiresAt.set(m.requestId, v.expiresAt);
          m.prefillDone = true;
          plans.push(entry);
        } else {
          const reason = roll < 0.6 ? "cancelled" : "finished";
          cause = { kind: "planEnd", requestId: m.requestId, reason };
          router.planEnd(entry.planId, reason);
          cause = { kind: "none" };
        }
      }
    }
    await settle();
    maxQueueDepth = Math.max(maxQueueDepth, router.queueDepth);
    check();
  }

  // Wind down: end every live request, let queued and planned ones expire, and nothing may remain.
  for (const a of aborters) {
    aborted.add(a.requestId);
    a.ac.abort();
  }
  for (let round = 0; round < 4; round++) {
    for (const m of [...live.values()]) {
      if (m.handle) {
        cause = { kind: "handle", requestId: m.requestId, reason: "finished" };
        m.handle.finish();
        cause = { kind: "none" };
      }
    }
    clock.advance(STALE_MS);
    router.tick();
    await settle();
    await Promise.all([...pending]);
  }
  check();
  expect(live.size).toBe(0);
  expect(router.liveBookings).toBe(0);
  expect(router.queueDepth).toBe(0);
  for (const r of router.snapshot().ranks) expect([r.activeRequests, r.activeBlocks, r.activePrefillTokens, r.expectedOutputBlocks]).toEqual([0, 0, 0, 0]);
  return { booked: bookedTotal, freed: freedOnce.size, reasons, outcomes, maxQueueDepth };
}

describe("lifecycle property: no leak, no double free, load = sum of live bookings", () => {
  it.each([
    [1, { affinityMode: "hard" }],
    [2, { affinityMode: "soft", queuePolicy: "wspt" }],
    [3, { assumeKvReuse: false, queuePolicy: "lcfs", busy: { activeDecodeBlocksFrac: 0.9 } }],
  ] as [number, RouterConfigInput][])("seed %i", async (seed, config) => {
    const r = await runScenario(seed, 2500, config);
    console.log(`seed ${seed}: ${JSON.stringify(r)}`);
    expect(r.freed).toBe(r.booked);
    // The scenario must actually exercise the paths it claims to.
    expect(r.booked).toBeGreaterThan(500);
    for (const reason of ["finished", "failed", "cancelled", "expired", "worker_removed", "plan_expired"]) expect(r.reasons[reason], reason).toBeGreaterThan(0);
    expect(r.maxQueueDepth).toBeGreaterThan(1);
    for (const o of ["routed", "committed", "queue_rejected", "KVGATE_ERR_NO_WORKERS", "KVGATE_ERR_CANCELLED"]) expect(r.outcomes[o], o).toBeGreaterThan(0);
  });
});
