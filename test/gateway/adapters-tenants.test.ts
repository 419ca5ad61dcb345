/**
 * @module Adapters and tenants through the gateway with scripted workers (approximate mode): which workers an adapter
 * request may reach, discovery from /v1/models, the tenant header, cache_salt isolation of predicted prefixes, the
 * per model/adapter hit-rate counters and the bounds.
 */
import { describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway } from "../../src/gateway/gateway.ts";
import { fakeGateway, FakeFleet, type SeenRequest } from "./fake-workers.ts";
import { TOKEN } from "./helpers.ts";

const LONG = "A long shared system prompt that every tenant of this deployment sends first. ".repeat(12);

function answer(req: SeenRequest): Response {
  return Response.json({ id: "c", object: "chat.completion", model: req.body.model, choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 300, completion_tokens: 1, total_tokens: 301, prompt_tokens_details: { cached_tokens: 150 } } });
}

const chat = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({ model: "m", messages: [{ role: "user", content: LONG }], max_tokens: 1, ...extra });

describe("tenants in approximate mode", () => {
  it("should predict no overlap for another tenant's cache_salt on the first tenant's worker, and a hit for the same tenant", async () => {
    const { fleet, call } = await fakeGateway(2);
    for (const w of ["w1", "w2"]) fleet.scripts.set(w, answer);
    const first = await call("/v1/chat/completions", chat({ cache_salt: "tenant-1" }));
    expect(first.status).toBe(200);
    const worker = first.headers.get("x-kvgate-worker")!;
    const route = async (extra: Record<string, unknown>) => (await call("/v1/route", chat({ ...extra, kvgate: { worker_id: worker } }))).json();
    const same = await route({ cache_salt: "tenant-1" });
    expect(same.namespace).toBe("tenant-1");
    expect(same.overlap_blocks).toBe(same.prompt_blocks);
    expect(same.prompt_blocks).toBeGreaterThan(10);
    expect(await route({ cache_salt: "tenant-2" })).toMatchObject({ namespace: "tenant-2", overlap_blocks: 0 });
    expect(await route({})).toMatchObject({ namespace: null, overlap_blocks: 0 });
    // The worker got the body as sent, cache_salt included (the engine isolates the same way).
    expect(fleet.calls()[0]!.body.cache_salt).toBe("tenant-1");
  });

  it("should make the tenant header the namespace and send it to the worker as cache_salt; a body cache_salt wins", async () => {
    const { fleet, call } = await fakeGateway(2, ["--tenant-header", "x-tenant-id"]);
    for (const w of ["w1", "w2"]) fleet.scripts.set(w, answer);
    const t1 = { headers: { "x-tenant-id": "acme" } };
    const first = await call("/v1/chat/completions", chat(), t1);
    expect(first.status).toBe(200);
    expect(fleet.calls()[0]!.body.cache_salt).toBe("acme");
    const worker = first.headers.get("x-kvgate-worker")!;
    const route = async (extra: Record<string, unknown>, init: RequestInit = {}) => (await call("/v1/route", chat({ ...extra, kvgate: { worker_id: worker } }), init)).json();
    const same = await route({}, t1);
    expect(same).toMatchObject({ namespace: "acme" });
    expect(same.overlap_blocks).toBe(same.prompt_blocks);
    expect(await route({}, { headers: { "x-tenant-id": "globex" } })).toMatchObject({ namespace: "globex", overlap_blocks: 0 });
    expect(await route({ cache_salt: "other" }, t1)).toMatchObject({ namespace: "other", overlap_blocks: 0 });
  });
});

describe("adapter requests", () => {
  it("should reach only workers serving the adapter or loading adapters on demand, and list adapters with their parent", async () => {
    const fleet = new FakeFleet();
    for (const w of ["w1", "w2", "w3"]) fleet.scripts.set(w, answer);
    const loaded = await loadGatewayConfig({ argv: ["--admin-token", TOKEN, "--log", "off", "--health-probe-ms", "0",
      "--worker", "url=http://w1.test,id=w1,models=m,adapters=A", "--worker", "url=http://w2.test,id=w2,models=m",
      "--worker", "url=http://w3.test,id=w3,models=m,lora_on_demand=true"], env: {} });
    if (loaded.kind !== "config") throw new Error("help");
    const gw = await createGateway(loaded.config, { fetch: fleet.fetch });
    const call = async (path: string, body: unknown) => gw.fetch(new Request(`http://kvgate.test${path}`, { method: "POST", body: JSON.stringify(body) }));
    const seen = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const r = await call("/v1/route", { model: "A", messages: [{ role: "user", content: `question ${i}` }], kvgate: { temperature: 5 } });
      seen.add((await r.json()).worker);
    }
    expect([...seen].sort()).toEqual(["w1", "w3"]);
    const none = await call("/v1/chat/completions", { model: "A", messages: [{ role: "user", content: "x" }], kvgate: { exclude_workers: ["w1", "w3"] } });
    expect(none.status).toBe(503);
    const pinned = await call("/v1/route", { model: "A", messages: [{ role: "user", content: "x" }], kvgate: { worker_id: "w2" } });
    expect(pinned.status).toBe(400);
    expect((await pinned.json()).error.message).toContain("adapter A");
    const models = await (await gw.fetch(new Request("http://kvgate.test/v1/models"))).json();
    expect(models.data.map((m: { id: string; parent: string | null }) => [m.id, m.parent])).toEqual([["m", null], ["A", "m"]]);
    // The worker gets the model name the client sent: vLLM serves the adapter under it.
    const sent = await call("/v1/chat/completions", { model: "A", messages: [{ role: "user", content: "x" }] });
    expect(sent.status).toBe(200);
    expect(fleet.calls().at(-1)!.body.model).toBe("A");
  });

  it("should discover adapters from /v1/models entries with a parent", async () => {
    const fleet = new FakeFleet();
    fleet.scripts.set("v1", (req) => req.path === "/v1/models"
      ? Response.json({ object: "list", data: [{ id: "base", parent: null }, { id: "sql-lora", parent: "base", root: "/loras/sql" }] })
      : answer(req));
    const loaded = await loadGatewayConfig({ argv: ["--admin-token", TOKEN, "--log", "off", "--health-probe-ms", "0", "--worker", "url=http://v1.test,id=v1"], env: {} });
    if (loaded.kind !== "config") throw new Error("help");
    const gw = await createGateway(loaded.config, { fetch: fleet.fetch });
    expect(gw.state.fleet.get("v1")!.models).toEqual(["base"]);
    expect(gw.state.fleet.get("v1")!.adapters).toEqual(["sql-lora"]);
    const r = await (await gw.fetch(new Request("http://kvgate.test/v1/route", { method: "POST", body: JSON.stringify({ model: "sql-lora", prompt: "select" }) }))).json();
    expect(r).toMatchObject({ worker: "v1", model: "base", adapter: "sql-lora" });
  });

  it("should count predicted and reported tokens per model and adapter in /metrics", async () => {
    const { fleet, call, gw } = await fakeGateway(1, [], ",adapters=A|B");
    fleet.scripts.set("w1", answer);
    expect((await call("/v1/chat/completions", chat({ model: "A" }))).status).toBe(200);
    expect((await call("/v1/chat/completions", chat())).status).toBe(200);
    const text = await (await gw.fetch(new Request("http://kvgate.test/metrics"))).text();
    expect(text).toContain('kvgate_model_prompt_tokens_total{adapter="A",model="m",source="reported"} 300');
    expect(text).toContain('kvgate_model_cached_tokens_total{adapter="A",model="m",source="reported"} 150');
    expect(text).toContain('kvgate_model_cached_tokens_total{adapter="",model="m",source="reported"} 150');
    expect(text).toMatch(/kvgate_model_prompt_tokens_total\{adapter="A",model="m",source="predicted"\} [1-9]/);
    expect(text).not.toContain('adapter="B"');
  });

  it("should tokenize an adapter with its own tokenizer when one is configured, else with its base model's", async () => {
    const { fleet, call, gw } = await fakeGateway(1, ["--tokenizer", "A=/nonexistent/dir"], ",adapters=A|B");
    fleet.scripts.set("w1", answer);
    expect((await call("/v1/chat/completions", chat({ model: "B" }))).status).toBe(200);
    expect(gw.state.metrics.tokenized.get({ mode: "fallback" })).toBe(0);
    expect((await call("/v1/chat/completions", chat({ model: "A" }))).status).toBe(200);
    expect(gw.state.metrics.tokenized.get({ mode: "fallback" })).toBe(1);
  });

  it("should refuse more adapters than --max-adapters", async () => {
    await expect(fakeGateway(1, ["--max-adapters", "1"], ",adapters=A|B")).rejects.toThrow(/max-adapters 1/);
  });
});
