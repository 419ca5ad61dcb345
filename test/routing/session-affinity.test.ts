import { describe, expect, it } from "vitest";
import type { RequestHandle } from "../../src/routing/request-handle.ts";
import type { RouteOutcome } from "../../src/routing/router.ts";
import { cache, fixture, prompt, worker } from "./helpers.ts";

function routed(o: RouteOutcome): { handle: RequestHandle; worker: string; via: string } {
  if (o.kind !== "routed") throw new Error(`expected routed, got ${o.kind}`);
  return { handle: o.handle, worker: o.signals.worker, via: o.signals.via };
}

const flush = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe("hard vs soft affinity", () => {
  async function boundToA(mode: "hard" | "soft") {
    const f = await fixture({ affinityMode: mode, busy: { activePrefillTokens: 150 } }, [worker("a"), worker("b")]);
    const first = routed(await f.router.route({ requestId: "s1", tokens: prompt(1, 64, 1), model: "m", sessionId: "S", target: { worker: "a" } }));
    first.handle.finish();
    expect(f.router.session("S")).toMatchObject({ target: { worker: "a", dpRank: 0 }, leases: 0 });
    // b now caches the session's next prompt, so scoring alone would move the session there.
    const next = prompt(2, 160, 2);
    cache(f.index, "b", 0, next, 10);
    return { f, next };
  }

  it("hard pins the session to its worker over a better cache hit", async () => {
    const { f, next } = await boundToA("hard");
    const r = routed(await f.router.route({ requestId: "s2", tokens: next, model: "m", sessionId: "S" }));
    expect([r.worker, r.via]).toEqual(["a", "session"]);
    expect((await f.router.query({ requestId: "q", tokens: next, model: "m" })).worker).toBe("b");
  });

  it("soft prefers the session's worker while it is eligible", async () => {
    const { f, next } = await boundToA("soft");
    expect(routed(await f.router.route({ requestId: "s2", tokens: next, model: "m", sessionId: "S" }))).toMatchObject({ worker: "a", via: "session" });
  });

  it("when the bound worker is busy, hard answers 503 and soft moves the session", async () => {
    for (const mode of ["hard", "soft"] as const) {
      const { f, next } = await boundToA(mode);
      routed(await f.router.route({ requestId: "load", tokens: prompt(9, 200, 9), model: "m", target: { worker: "a" } }));
      const out = f.router.route({ requestId: "s2", tokens: next, model: "m", sessionId: "S" });
      if (mode === "hard") {
        await expect(out).rejects.toMatchObject({ code: "KVGATE_ERR_ALL_WORKERS_BUSY" });
        expect(f.router.session("S")?.target?.worker).toBe("a");
      } else {
        expect(routed(await out)).toMatchObject({ worker: "b", via: "scored" });
        expect(f.router.session("S")).toMatchObject({ target: { worker: "b" }, leases: 1 });
      }
    }
  });

  it("rejects an explicit target that disagrees with a hard binding", async () => {
    const { f, next } = await boundToA("hard");
    await expect(f.router.route({ requestId: "x", tokens: next, model: "m", sessionId: "S", target: { worker: "b" } }))
      .rejects.toMatchObject({ code: "KVGATE_ERR_SESSION_CONFLICT", status: 409 });
    expect(routed(await f.router.route({ requestId: "y", tokens: next, model: "m", sessionId: "S", target: { worker: "a" } })).worker).toBe("a");
  });

  it("query-only reads the binding without taking a lease or creating sessions", async () => {
    const { f, next } = await boundToA("hard");
    expect(await f.router.query({ requestId: "q", tokens: next, model: "m", sessionId: "S" })).toMatchObject({ worker: "a", via: "session" });
    expect(f.router.session("S")?.leases).toBe(0);
    await f.router.query({ requestId: "q", tokens: next, model: "m", sessionId: "fresh" });
    expect(f.router.session("fresh")).toBeUndefined();
  });
});

describe("binding lifecycle", () => {
  it("forgets an idle session after its TTL, but never while a request is live", async () => {
    const f = await fixture({ sessionTtlMs: 10_000 }, [worker("a"), worker("b")]);
    const r = routed(await f.router.route({ requestId: "1", tokens: prompt(1, 64, 1), model: "m", sessionId: "S" }));
    f.clock.advance(60_000);
    f.router.tick();
    expect(f.router.session("S")?.leases).toBe(1);
    r.handle.finish();
    f.clock.advance(9_999);
    expect(f.router.tick().sessionsReaped).toBe(0);
    f.clock.advance(1);
    expect(f.router.tick().sessionsReaped).toBe(1);
    expect(f.router.session("S")).toBeUndefined();
  });

  it("caps the session table and frees room as sessions expire", async () => {
    const f = await fixture({ sessionMaxEntries: 2, sessionTtlMs: 1000 }, [worker("a")]);
    for (const s of ["S1", "S2"]) routed(await f.router.route({ requestId: s, tokens: prompt(1, 64, 1), model: "m", sessionId: s })).handle.finish();
    await expect(f.router.route({ requestId: "S3", tokens: prompt(1, 64, 1), model: "m", sessionId: "S3" }))
      .rejects.toMatchObject({ code: "KVGATE_ERR_SESSION_LIMIT", status: 503 });
    f.clock.advance(1000);
    expect(routed(await f.router.route({ requestId: "S3", tokens: prompt(1, 64, 1), model: "m", sessionId: "S3" })).worker).toBe("a");
  });

  it("validates the session id length", async () => {
    const f = await fixture({ sessionMaxIdBytes: 8 }, [worker("a")]);
    await expect(f.router.route({ requestId: "x", tokens: prompt(1, 64, 1), model: "m", sessionId: "ééééé" })).rejects.toMatchObject({ code: "KVGATE_ERR_BAD_ARGUMENT" });
  });

  it("concurrent first requests wait for the first binding and follow it", async () => {
    const f = await fixture({ queueThreshold: 1 }, [worker("a", { maxBatchedTokens: 100 }), worker("b", { maxBatchedTokens: 100 })]);
    const blockers = [
      routed(await f.router.route({ requestId: "ba", tokens: prompt(90, 200, 90), model: "m", target: { worker: "a" } })),
      routed(await f.router.route({ requestId: "bb", tokens: prompt(91, 200, 91), model: "m", target: { worker: "b" } })),
    ];
    const first = f.router.route({ requestId: "s1", tokens: prompt(1, 64, 1), model: "m", sessionId: "S" });
    const second = f.router.route({ requestId: "s2", tokens: prompt(2, 64, 2), model: "m", sessionId: "S" });
    const third = f.router.route({ requestId: "s3", tokens: prompt(3, 64, 3), model: "m", sessionId: "S" });
    await flush();
    expect(f.router.queueDepth).toBe(1); // only the first request queues; the others wait on the session
    expect(f.router.session("S")?.initializing).toBe(true);
    blockers[1]!.handle.finish(); // b frees up: the first request lands there and binds
    const [r1, r2] = (await Promise.all([first, second])).map(routed);
    expect([r1!.worker, r2!.worker]).toEqual(["b", "b"]);
    // Pinned to b, the third waits in the queue for b alone even though it is the only queued request.
    await flush();
    expect(f.router.queueDepth).toBe(1);
    blockers[0]!.handle.finish();
    expect(f.router.queueDepth).toBe(1);
    r1!.handle.firstToken();
    expect(routed(await third).worker).toBe("b");
    expect(f.router.session("S")).toMatchObject({ target: { worker: "b" }, leases: 3, initializing: false });
  });

  it("a waiting request can be cancelled, and a failed first request lets a waiter bind", async () => {
    const f = await fixture({ queueThreshold: 1, queueMaxWaitMs: 1000 }, [worker("a", { maxBatchedTokens: 100 })]);
    const blocker = routed(await f.router.route({ requestId: "blk", tokens: prompt(90, 200, 90), model: "m" }));
    const first = f.router.route({ requestId: "s1", tokens: prompt(1, 64, 1), model: "m", sessionId: "S" });
    const ac = new AbortController();
    const cancelled = f.router.route({ requestId: "s2", tokens: prompt(2, 64, 2), model: "m", sessionId: "S", signal: ac.signal });
    const waiter = f.router.route({ requestId: "s3", tokens: prompt(3, 64, 3), model: "m", sessionId: "S" });
    await flush();
    ac.abort();
    await expect(cancelled).rejects.toMatchObject({ code: "KVGATE_ERR_CANCELLED" });
    f.clock.advance(1000);
    f.router.tick(); // the first request's queue wait runs out: rejected, its claim is given up
    expect((await first).kind).toBe("queue_rejected");
    await flush();
    expect(f.router.queueDepth).toBe(1); // the waiter took over the binding and queued
    blocker.handle.finish();
    expect(routed(await waiter).worker).toBe("a");
    expect(f.router.session("S")).toMatchObject({ target: { worker: "a" }, leases: 1 });
  });

  it("re-selects a hard binding once when its worker vanished, and concurrent requests follow the new binding", async () => {
    const f = await fixture({}, [worker("a"), worker("b"), worker("c")]);
    const r1 = routed(await f.router.route({ requestId: "1", tokens: prompt(1, 64, 1), model: "m", sessionId: "S", target: { worker: "a" } }));
    f.router.removeWorker("a");
    expect(r1.handle.active).toBe(false);
    const next = prompt(2, 160, 2);
    cache(f.index, "c", 0, next, 10);
    const [x, y] = await Promise.all([
      f.router.route({ requestId: "2", tokens: next, model: "m", sessionId: "S" }),
      f.router.route({ requestId: "3", tokens: prompt(3, 64, 3), model: "m", sessionId: "S" }),
    ]);
    expect(routed(x)).toMatchObject({ worker: "c", via: "scored" });
    expect(routed(y)).toMatchObject({ worker: "c", via: "session" });
    expect(f.router.session("S")).toMatchObject({ target: { worker: "c" }, leases: 2 });
    // A drained worker also counts as vanished for a hard binding.
    f.router.drainWorker("c");
    expect(routed(await f.router.route({ requestId: "4", tokens: next, model: "m", sessionId: "S" })).worker).toBe("b");
  });
});

describe("bindings made elsewhere", () => {
  it("adopts a peer's binding, never over a request binding here, and lists live bindings only", async () => {
    const { SessionAffinity } = await import("../../src/routing/session-affinity.ts");
    let now = 0;
    const s = new SessionAffinity(() => now, { ttlMs: 1_000, maxEntries: 2, maxIdBytes: 64 });
    expect(s.adopt("a", { worker: "w1", dpRank: 0 })).toBe(true);
    expect(await s.claim("a")).toEqual({ kind: "bound", target: { worker: "w1", dpRank: 0 } });
    const first = await s.claim("b");
    expect(first.kind).toBe("first");
    expect(s.adopt("b", { worker: "w2", dpRank: 0 })).toBe(false);
    if (first.kind === "first") s.bind("b", first.token, { worker: "w3", dpRank: 1 });
    expect([...s.bindings()]).toEqual([["a", { worker: "w1", dpRank: 0 }], ["b", { worker: "w3", dpRank: 1 }]]);
    // The table is full: a third session is refused until the others expire.
    expect(s.adopt("c", { worker: "w1", dpRank: 0 })).toBe(false);
    now = 1_500;
    expect([...s.bindings()]).toEqual([]);
    expect(s.adopt("c", { worker: "w1", dpRank: 0 })).toBe(true);
    expect(s.peek("c")).toEqual({ worker: "w1", dpRank: 0 });
  });
});
