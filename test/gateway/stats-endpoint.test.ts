/**
 * GET /v1/stats and GET /dashboard on an in-process gateway with the built-in simulated fleet (real HTTP engines on
 * loopback). The gateway clock is a ManualClock, so the series' interval times are exact.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimServer } from "../../src/adapter/node/sim-server.ts";
import { startDefaultFleet, SIM_MODEL, type DefaultFleet } from "../../src/sim/default-fleet.ts";
import { ManualClock } from "../../src/routing/index.ts";
import type { StatsBody } from "../../src/gateway/stats-snapshot.ts";
import { post, sseData, startTestGateway, TOKEN, type TestGateway } from "./helpers.ts";

const auth = { authorization: `Bearer ${TOKEN}` };
const chat = (content: string) => ({ model: SIM_MODEL, stream: true, max_tokens: 8, messages: [{ role: "user", content }] });
const LONG = "Explain how a KV-cache-aware router picks a worker for a prompt that shares a long prefix with earlier ones. ".repeat(12);

describe("GET /v1/stats", () => {
  const clock = new ManualClock(100_000);
  let gw: TestGateway;
  let fleet: DefaultFleet;
  const stats = async (q = ""): Promise<StatsBody> => {
    const res = await fetch(`${gw.url}/v1/stats${q}`, { headers: auth });
    expect(res.status).toBe(200);
    return (await res.json()) as StatsBody;
  };

  beforeAll(async () => {
    gw = await startTestGateway(["--engine-metrics-ms", "1000"], { now: clock.now });
    fleet = await startDefaultFleet(gw.gateway, startSimServer, 2, 1024, 16);
  });
  afterAll(async () => {
    await fleet?.close();
    await gw?.close();
    await gw?.gateway.close();
  });

  it("answers 401 error JSON without the admin token or with a wrong one, and 400 for a bad since", async () => {
    for (const headers of [{}, { authorization: "Bearer nope" }] as Record<string, string>[]) {
      const res = await fetch(`${gw.url}/v1/stats`, { headers });
      expect(res.status).toBe(401);
      expect((await res.json()).error).toMatchObject({ code: "KVGATE_ERR_UNAUTHORIZED", type: "invalid_request_error" });
    }
    const bad = await fetch(`${gw.url}/v1/stats?since=yesterday`, { headers: auth });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toMatchObject({ code: "KVGATE_ERR_BAD_ARGUMENT" });
  });

  it("shows every worker rank with its load before traffic", async () => {
    const s = await stats();
    expect(s.object).toBe("kvgate.stats");
    expect(s.now).toBe(100_000);
    expect(s.interval_ms).toBe(2_000);
    expect(s.window_ms).toBe(600_000);
    expect(s.workers.map((w) => w.id)).toEqual(["sim-0", "sim-1"]);
    for (const w of s.workers) {
      expect(w).toMatchObject({ health: "healthy", kv_events: true, cold: false, unreachable: false });
      expect(w.ranks).toEqual([expect.objectContaining({ dp_rank: 0, active_requests: 0, total_kv_blocks: 1024, cache_usage: 0, cache_usage_source: "router" })]);
    }
    expect(s.series.t).toEqual([100_000]);
    expect(s.series.predicted_hit_rate).toEqual([null]);
  });

  it("records predicted and engine-reported hit rates, TTFT and ITL, and KV-event ingest per interval", async () => {
    clock.advance(2_000);
    // The housekeeping tick samples the ingest counters (the Node adapter runs it on a timer).
    await gw.gateway.tick();
    for (let i = 0; i < 3; i++) {
      const res = await post(`${gw.url}/v1/chat/completions`, chat(LONG));
      expect(res.status).toBe(200);
      expect((await sseData(res)).at(-1)).toBe("[DONE]");
    }
    // Let the engines' KV events arrive (they push through callbackSinks) and the engine-metrics scrape run.
    await gw.gateway.tick();
    const s = await stats("?since=102000");
    expect(s.series.t).toEqual([102_000]);
    expect(s.series.requests).toEqual([3]);
    // The first request found nothing cached; the next two the whole prefix: predicted and reported agree roughly.
    expect(s.series.predicted_hit_rate[0]).toBeGreaterThan(0.5);
    expect(s.series.reported_hit_rate[0]).toBeGreaterThan(0.5);
    expect(s.series.ttft_p50_ms[0]).toBeGreaterThan(0);
    expect(s.series.ttft_p99_ms[0]).toBeGreaterThanOrEqual(s.series.ttft_p50_ms[0]!);
    expect(s.series.itl_p50_ms[0]).toBeGreaterThan(0);
    expect(s.kv_events.events).toBeGreaterThan(0);
    // A stream opens with its first batch: the workers that served the requests.
    expect(s.kv_events.streams).toBeGreaterThanOrEqual(1);
    expect(s.series.kv_events_per_s[0]).toBeGreaterThan(0);
    expect(s.router.index_entries).toBeGreaterThan(0);
    // The decisions, newest first, each with both workers weighed and the chosen one marked.
    expect(s.decisions_total).toBe(3);
    expect(s.decisions).toHaveLength(3);
    expect(s.decisions[0]!.at).toBe(102_000);
    for (const d of s.decisions) {
      expect(d).toMatchObject({ model: SIM_MODEL, via: "scored" });
      expect(d.candidates.map((c) => c.worker).sort()).toEqual(["sim-0", "sim-1"]);
      expect(d.candidates.filter((c) => c.chosen).map((c) => c.worker)).toEqual([d.worker]);
    }
    // The last two found the prompt cached on the worker the first one went to.
    expect(s.decisions[0]!.overlap_blocks).toBeGreaterThan(0);
    expect(s.decisions[0]!.worker).toBe(s.decisions[2]!.worker);
    // The scrape reported the engine's own KV usage for every rank.
    for (const w of s.workers) expect(w.ranks[0]).toMatchObject({ cache_usage_source: "engine", engine: { running: 0, waiting: 0 } });
  });

  it("returns only the intervals from since on, and all of the window without it", async () => {
    clock.advance(4_000);
    const all = await stats();
    expect(all.series.t).toEqual([100_000, 102_000, 104_000, 106_000]);
    expect(all.series.requests).toEqual([0, 3, 0, 0]);
    expect((await stats("?since=104000")).series.t).toEqual([104_000, 106_000]);
  });

  it("serves the dashboard page self-contained, with an ETag", async () => {
    const res = await fetch(`${gw.url}/dashboard`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toContain('id="chart-hit"');
    expect(html).toContain("u-legend"); // uPlot's stylesheet is inline
    // No script, stylesheet or image from anywhere but the page itself.
    expect(html).not.toMatch(/<(script|link|img)[^>]+(src|href)="(https?:)?\/\//);
    const again = await fetch(`${gw.url}/dashboard`, { headers: { "if-none-match": res.headers.get("etag")! } });
    expect(again.status).toBe(304);
  });
});

describe("GET /v1/stats without an admin token configured", () => {
  it("answers anyone (the gateway has no admin token to ask for)", async () => {
    const { loadGatewayConfig } = await import("../../src/gateway/config-load.ts");
    const { createGateway } = await import("../../src/gateway/gateway.ts");
    const loaded = await loadGatewayConfig({ argv: ["--log", "off"], env: {} });
    if (loaded.kind !== "config") throw new Error("help");
    const g = await createGateway(loaded.config, { now: () => 5_000 });
    const res = await g.fetch(new Request("http://kvgate/v1/stats"));
    expect(res.status).toBe(200);
    expect(((await res.json()) as StatsBody).series.t).toEqual([4_000]);
    await g.close();
  });
});
