/**
 * @module x-kvgate-explain over HTTP on Node: a gateway in front of simulated engines (served over HTTP, KV events
 * pushed back) answers non-streamed, streamed and /v1/route requests with the decision's candidates table; only the
 * admin token's holder may ask when a token is set; the ring behind /v1/stats fills meanwhile.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimServer } from "../../src/adapter/node/sim-server.ts";
import { EXPLAIN_COLUMNS, explainHeaderValue, parseExplainHeader, type ExplainTable } from "../../src/gateway/explain.ts";
import type { DecisionRecord } from "../../src/routing/index.ts";
import { post, sseData, startSim, startTestGateway, TOKEN, type TestGateway } from "./helpers.ts";

const MODEL = "sim-model";
let gw: TestGateway;
let sims: SimServer[] = [];
const seen: Headers[] = [];

beforeAll(async () => {
  const recording: typeof fetch = (input, init) => {
    if (String(input).includes("/v1/")) seen.push(new Headers(init?.headers));
    return fetch(input, init);
  };
  gw = await startTestGateway(["--decisions-recent", "5"], { fetch: recording });
  for (let i = 0; i < 3; i++) {
    const s = await startSim(gw.url, { model: MODEL, workerId: `e${i}` });
    sims.push(s);
    await gw.gateway.state.fleet.add({ url: s.url, id: `e${i}`, models: [MODEL], kvEvents: true, blockSize: 16 });
  }
});

afterAll(async () => {
  await Promise.allSettled(sims.map((s) => s.close()));
  await gw?.close();
});

const chat = (content: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 4, ...extra });
const explain = { "x-kvgate-explain": "1", authorization: `Bearer ${TOKEN}` };

function checkTable(t: ExplainTable, worker: string | null): void {
  expect(t.columns).toEqual(EXPLAIN_COLUMNS);
  expect(t.rows.map((r) => r[0]).sort()).toEqual(["e0", "e1", "e2"]);
  expect(t.via).toBe("scored");
  expect(t.chosen).toBeGreaterThanOrEqual(0);
  if (worker !== null) expect(t.rows[t.chosen]![0]).toBe(worker);
  expect(t.worker).toBe(t.rows[t.chosen]![0]);
  const costs = t.rows.map((r) => r[6]);
  // Temperature 0: the chosen row costs the least.
  expect(t.rows[t.chosen]![6]).toBe(Math.min(...costs));
}

describe("x-kvgate-explain", () => {
  it("puts the candidates table in a header of a non-streamed answer, and keeps the header from the engine", async () => {
    const res = await post(`${gw.url}/v1/chat/completions`, chat("explain me a non-streamed answer please"), explain);
    expect(res.status).toBe(200);
    await res.json();
    const value = res.headers.get("x-kvgate-explain")!;
    expect(value.startsWith("{")).toBe(true);
    checkTable(await parseExplainHeader(value), res.headers.get("x-kvgate-worker"));
    const upstream = seen.at(-1)!;
    expect(upstream.has("x-kvgate-explain")).toBe(false);
    expect(upstream.has("authorization")).toBe(false);
  });

  it("explains a streamed answer the same way, before its first event", async () => {
    const res = await post(`${gw.url}/v1/chat/completions`, chat("explain me a streamed answer please", { stream: true }), explain);
    expect(res.status).toBe(200);
    const t = await parseExplainHeader(res.headers.get("x-kvgate-explain")!);
    checkTable(t, res.headers.get("x-kvgate-worker"));
    expect((await sseData(res)).at(-1)).toBe("[DONE]");
  });

  it("returns the table in the body of /v1/route", async () => {
    const res = await post(`${gw.url}/v1/route`, chat("explain me a preview"), explain);
    expect(res.status).toBe(200);
    const body = await res.json() as { worker: string; explain: ExplainTable };
    checkTable(body.explain, body.worker);
    const plain = await (await post(`${gw.url}/v1/route`, chat("explain me a preview"))).json() as Record<string, unknown>;
    expect(plain.explain).toBeUndefined();
  });

  it("sends no table unless asked, and refuses it without the admin token (403) or with a bad value (400)", async () => {
    const res = await post(`${gw.url}/v1/chat/completions`, chat("no explain"));
    expect(res.status).toBe(200);
    expect(res.headers.get("x-kvgate-explain")).toBeNull();
    await res.arrayBuffer();
    const attempts: Record<string, string>[] = [{ "x-kvgate-explain": "1" }, { "x-kvgate-explain": "1", authorization: "Bearer wrong" }];
    for (const headers of attempts) {
      const denied = await post(`${gw.url}/v1/chat/completions`, chat("sneaky"), headers);
      expect(denied.status).toBe(403);
      expect((await denied.json()).error.code).toBe("KVGATE_ERR_FORBIDDEN");
    }
    const deniedRoute = await post(`${gw.url}/v1/route`, chat("sneaky"), { "x-kvgate-explain": "1" });
    expect(deniedRoute.status).toBe(403);
    const bad = await post(`${gw.url}/v1/chat/completions`, chat("bad"), { "x-kvgate-explain": "yes please" });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.code).toBe("KVGATE_ERR_BAD_ARGUMENT");
  });

  it("keeps the last --decisions-recent booked decisions in gw.decisions, newest first", async () => {
    const ring = gw.gateway.state.decisions;
    const before = ring.total;
    for (let i = 0; i < 7; i++) {
      const res = await post(`${gw.url}/v1/chat/completions`, chat(`ring request ${i}`));
      await res.arrayBuffer();
    }
    expect(ring.total - before).toBe(7);
    const recent = ring.recent();
    expect(recent).toHaveLength(5);
    expect(recent[0]!.at).toBeGreaterThanOrEqual(recent[4]!.at);
    for (const r of recent) expect(r.candidates).toHaveLength(3);
  });

  it("without an admin token anyone may ask", async () => {
    const open = await startTestGateway(["--admin-token", ""]);
    try {
      await open.gateway.state.fleet.add({ url: sims[0]!.url, id: "e0", models: [MODEL], kvEvents: false, blockSize: 16 });
      const res = await post(`${open.url}/v1/route`, chat("hi"), { "x-kvgate-explain": "1" });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { explain: ExplainTable }).explain.rows).toHaveLength(1);
    } finally {
      await open.close();
    }
  });
});

describe("explain header encoding", () => {
  it("compresses a large table (256 candidates) to base64url gzip and reads it back", async () => {
    const candidates = Array.from({ length: 256 }, (_, i) => ({ worker: `worker-${i}.example.internal:8000`, dpRank: 0, overlapBlocks: i % 7, prefillTokens: 1000 + i, decodeBlocks: 40 + i, activeOverlapBlocks: 0, cost: 123.5 + i }));
    const rec = { at: 0, model: "m", chosen: 3, candidates, signals: { requestId: "r", via: "scored", worker: "worker-3.example.internal:8000", dpRank: 0, bestOverlapBlocks: 6, promptBlocks: 10 } } as unknown as DecisionRecord;
    const v = await explainHeaderValue(rec);
    expect(v).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(v.length).toBeLessThan(JSON.stringify(candidates).length / 3);
    const t = await parseExplainHeader(v);
    expect(t.rows).toHaveLength(256);
    expect(t.rows[255]).toEqual(["worker-255.example.internal:8000", 0, 255 % 7, 1255, 295, 0, 378.5]);
  });
});
