/**
 * Two-phase routing over HTTP, in process, on a hand-moved clock: commit books and returns a plan id and expiry; the
 * reports move and free the booking; an unreported plan is freed at its TTL; unknown ids, bad bodies, the cap and
 * the route token answer OpenAI errors; /metrics counts plans by outcome.
 */
import { describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway } from "../../src/gateway/gateway.ts";
import { ManualClock } from "../../src/routing/clock.ts";
import { FakeFleet } from "./fake-workers.ts";
import { TOKEN } from "./helpers.ts";

async function planGateway(argv: string[] = []) {
  const clock = new ManualClock(50_000);
  const fleet = new FakeFleet();
  const workers = ["w1", "w2"].flatMap((w) => ["--worker", `url=http://${w}.test,id=${w},models=m,kv_events=false`]);
  const loaded = await loadGatewayConfig({
    argv: ["--admin-token", TOKEN, "--log", "off", "--health-probe-ms", "0", "--health-check-ms", "0", "--tick-ms", "1000", ...workers, ...argv], env: {},
  });
  if (loaded.kind !== "config") throw new Error("help");
  const gw = await createGateway(loaded.config, { fetch: fleet.fetch, now: clock.now });
  const call = async (path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await gw.fetch(new Request(`http://kvgate.test${path}`, {
      method: "POST", headers: { "content-type": "application/json", ...headers }, body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    }));
    return { status: res.status, headers: res.headers, body: await res.json() as Record<string, any> };
  };
  const loads = () => gw.state.router.snapshot().ranks.map((r) => [r.worker, r.activeRequests, r.activePrefillTokens, r.activeBlocks]);
  const metrics = async () => (await gw.fetch(new Request("http://kvgate.test/metrics"))).text();
  return { gw, clock, fleet, call, loads, metrics };
}

const chat = (content: string, extra: Record<string, unknown> = {}) => ({ model: "m", messages: [{ role: "user", content }], ...extra });
const LONG = "A shared system prompt that spans several KV blocks of sixteen tokens each. ".repeat(8);
const series = (text: string, name: string): number | undefined => {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
};

describe("POST /v1/route with commit", () => {
  it("starts a plan's TTL again on first_token and keepalive, and still frees a due plan behind a renewed one", async () => {
    const { gw, clock, call, metrics } = await planGateway(["--plan-ttl-ms", "30000"]);
    const a = (await call("/v1/route", chat(LONG, { commit: true }))).body;
    clock.advance(1_000);
    const b = (await call("/v1/route", chat("a second prompt, long enough for a block or two of its own", { commit: true }))).body;
    clock.advance(19_000);
    // a: first token 20 s after its commit; its 30 s start again from here.
    expect((await call(`/v1/route/${a.plan_id}/first_token`)).body).toMatchObject({ state: "decode", expires_in_ms: 30_000 });
    clock.advance(10_999);
    await gw.tick();
    expect(gw.state.router.liveBookings).toBe(2);
    // b was committed 31 s ago: due, although a (renewed, now later) was opened before it.
    clock.advance(1);
    await gw.tick();
    expect(gw.state.router.liveBookings).toBe(1);
    expect((await call(`/v1/route/${b.plan_id}/keepalive`)).status).toBe(404);
    const kept = await call(`/v1/route/${a.plan_id}/keepalive`, {});
    expect(kept.body).toMatchObject({ plan_id: a.plan_id, state: "decode", expires_in_ms: 30_000 });
    clock.advance(29_999);
    await gw.tick();
    expect(gw.state.router.liveBookings).toBe(1);
    clock.advance(1);
    await gw.tick();
    expect(gw.state.router.liveBookings).toBe(0);
    expect(series(await metrics(), 'kvgate_route_plans_closed_total{outcome="expired"}')).toBe(2);
  });

  it("books the decision and returns the plan id, the expiry and the endpoint header; the reports move and free it", async () => {
    // At the reference's new-prefill factor, so the held prefill outweighs the cached prompt (kvgate's 1.5 waits for it).
    const { call, loads, metrics } = await planGateway(["--plan-ttl-ms", "20000", "--new-prefill-factor", "1"]);
    const res = await call("/v1/route", chat(LONG, { commit: true }));
    expect(res.status).toBe(200);
    const b = res.body;
    expect(b).toMatchObject({ object: "kvgate.route", expires_in_ms: 20_000, via: "scored" });
    expect(b.plan_id).toMatch(/^kvp-[0-9a-f]{32}$/);
    expect(res.headers.get("x-gateway-destination-endpoint")).toBe(`${b.worker}.test`);
    const prefill = b.prompt_tokens - b.cached_tokens;
    expect(prefill).toBeGreaterThan(0);
    expect(loads().find((l) => l[0] === b.worker)).toEqual([b.worker, 1, prefill, b.prompt_blocks]);
    // The booking is visible to the next decision: the prompt is recorded on the booked worker (approximate mode),
    // yet that worker's booked prefill and blocks make the idle one cheaper.
    const next = await call("/v1/route", chat(LONG));
    expect(next.body.best_overlap_blocks).toBe(b.prompt_blocks);
    expect(next.body.worker).not.toBe(b.worker);

    const ft = await call(`/v1/route/${b.plan_id}/first_token`);
    expect(ft.body).toEqual({ object: "kvgate.route_plan", plan_id: b.plan_id, request_id: b.request_id, worker: b.worker, dp_rank: 0, state: "decode", expires_in_ms: 20_000 });
    expect((await call(`/v1/route/${b.plan_id}/first_token`, {})).body.state).toBe("decode");
    expect(loads().find((l) => l[0] === b.worker)).toEqual([b.worker, 1, 0, b.prompt_blocks]);

    const done = await call(`/v1/route/${b.plan_id}/complete`, { usage: { prompt_tokens: 100, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 25 } } });
    expect(done.body).toMatchObject({ plan_id: b.plan_id, state: "completed" });
    expect(loads().every((l) => l[1] === 0 && l[2] === 0 && l[3] === 0)).toBe(true);
    const m = await metrics();
    expect(series(m, "kvgate_route_plans_opened_total")).toBe(1);
    expect(series(m, 'kvgate_route_plans_closed_total{outcome="completed"}')).toBe(1);
    expect(series(m, "kvgate_route_plans_open")).toBe(0);
    expect(series(m, "kvgate_reported_cached_tokens_total")).toBe(25);
    expect(series(m, "kvgate_predicted_cached_tokens_total")).toBe(b.cached_tokens);

    const again = await call(`/v1/route/${b.plan_id}/complete`);
    expect([again.status, again.body.error.code, again.body.error.type]).toEqual([404, "KVGATE_ERR_PLAN_NOT_FOUND", "not_found_error"]);
  });

  it("frees a plan nobody reports on when its TTL passes on the injected clock, and counts it expired", async () => {
    const { gw, clock, call, loads, metrics } = await planGateway(["--plan-ttl-ms", "30000"]);
    const a = (await call("/v1/route", chat(LONG, { commit: true }))).body;
    clock.advance(10_000);
    const b = (await call("/v1/route", chat("another prompt entirely, long enough for a block or two", { commit: true }))).body;
    expect(b.expires_in_ms).toBe(30_000);
    await call(`/v1/route/${b.plan_id}/first_token`);
    expect(gw.state.router.liveBookings).toBe(2);

    clock.advance(19_999);
    await gw.tick();
    expect(gw.state.router.liveBookings).toBe(2);
    clock.advance(1);
    await gw.tick();
    expect(gw.state.router.liveBookings).toBe(1);
    expect((await call(`/v1/route/${a.plan_id}/first_token`)).status).toBe(404);
    expect(series(await metrics(), 'kvgate_route_plans_closed_total{outcome="expired"}')).toBe(1);

    clock.advance(10_000);
    await gw.tick();
    expect(loads().every((l) => l[1] === 0 && l[2] === 0 && l[3] === 0)).toBe(true);
    const m = await metrics();
    expect(series(m, 'kvgate_route_plans_closed_total{outcome="expired"}')).toBe(2);
    expect(series(m, "kvgate_route_plans_open")).toBe(0);
    expect(series(m, 'kvgate_worker_active_requests{dp_rank="0",worker="w1"}')).toBe(0);
    expect(series(m, 'kvgate_worker_active_requests{dp_rank="0",worker="w2"}')).toBe(0);
  });

  it("cancel frees the booking; complete before first_token frees it too", async () => {
    const { call, loads, metrics } = await planGateway();
    const a = (await call("/v1/route", chat(LONG, { commit: true }))).body;
    expect((await call(`/v1/route/${a.plan_id}/cancel`)).body.state).toBe("cancelled");
    const b = (await call("/v1/route", chat(LONG, { commit: true }))).body;
    expect((await call(`/v1/route/${b.plan_id}/complete`, "")).body.state).toBe("completed");
    expect(loads().every((l) => l[1] === 0)).toBe(true);
    expect(series(await metrics(), 'kvgate_route_plans_closed_total{outcome="cancelled"}')).toBe(1);
  });

  it("answers unknown ids 404, malformed bodies and fields 400, past the cap 503, without a route token 401", async () => {
    const { call } = await planGateway(["--max-open-plans", "1"]);
    const open = (await call("/v1/route", chat(LONG, { commit: true }))).body;
    const cases: [Awaited<ReturnType<typeof call>>, number, string][] = [
      [await call("/v1/route/kvp-nope/first_token"), 404, "KVGATE_ERR_PLAN_NOT_FOUND"],
      [await call("/v1/route/kvp-nope/cancel"), 404, "KVGATE_ERR_PLAN_NOT_FOUND"],
      [await call(`/v1/route/${open.plan_id}/complete`, "{not json"), 400, "KVGATE_ERR_BAD_ARGUMENT"],
      [await call(`/v1/route/${open.plan_id}/complete`, { usage: { prompt_tokens: -1 } }), 400, "KVGATE_ERR_BAD_ARGUMENT"],
      [await call(`/v1/route/${open.plan_id}/complete`, { usage: "lots" }), 400, "KVGATE_ERR_BAD_ARGUMENT"],
      [await call(`/v1/route/${open.plan_id}/first_token`, [1]), 400, "KVGATE_ERR_BAD_ARGUMENT"],
      [await call("/v1/route", chat("x", { commit: "yes" })), 400, "KVGATE_ERR_BAD_ARGUMENT"],
      [await call("/v1/route", chat("x", { commit: true, kvgate: { query_only: true } })), 400, "KVGATE_ERR_BAD_ARGUMENT"],
      [await call("/v1/route", chat("x", { commit: true })), 503, "KVGATE_ERR_PLAN_LIMIT"],
      [await call(`/v1/route/${open.plan_id}/nothing`), 404, "KVGATE_ERR_NOT_FOUND"],
    ];
    for (const [res, status, code] of cases) {
      expect([res.status, res.body.error?.code]).toEqual([status, code]);
      expect(typeof res.body.error.message).toBe("string");
    }
    // The malformed reports changed nothing: the plan is still open and in prefill.
    expect((await call(`/v1/route/${open.plan_id}/first_token`)).body.state).toBe("decode");

    const guarded = await planGateway(["--route-token", "picker"]);
    expect((await guarded.call("/v1/route", chat("x"))).status).toBe(200);
    const denied = await guarded.call("/v1/route", chat("x", { commit: true }));
    expect([denied.status, denied.body.error.code]).toEqual([401, "KVGATE_ERR_UNAUTHORIZED"]);
    const auth = { authorization: "Bearer picker" };
    const ok = await guarded.call("/v1/route", chat("x", { commit: true }), auth);
    expect(ok.status).toBe(200);
    expect((await guarded.call(`/v1/route/${ok.body.plan_id}/cancel`)).status).toBe(401);
    expect((await guarded.call(`/v1/route/${ok.body.plan_id}/cancel`, undefined, auth)).status).toBe(200);
  });
});
