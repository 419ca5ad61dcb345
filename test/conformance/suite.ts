/**
 * @module The one HTTP conformance suite, run against kvgate as a real process on each runtime (node.test.ts,
 * bun.test.ts, deno.test.ts, workerd.test.ts). Workers are simulated engines on loopback ports: three in this
 * process (A and B serve the model, C another one) and V in its own process, slow enough to cancel and to kill
 * mid-stream. The tests share one gateway and run in order; each leaves the fleet as it found it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimServer } from "../../src/adapter/node/sim-server.ts";
import { FILLER_TEXT, simChatTokens } from "../../src/sim/sim-tokenizer.ts";
import { encodeKvEventBatch } from "../../src/sim/kv-event-codec.ts";
import { ADAPTER, admin, allData, longText, metric, MODEL, OTHER_MODEL, post, simFor, simProcess, sseData, TOKEN, type SimProcess } from "./fleet.ts";
import { freePort, until } from "./processes.ts";
import { startGateway, type RunningGateway, type RuntimeName } from "./runtimes.ts";
import { parseExplainHeader } from "../../src/gateway/explain.ts";

export function conformanceSuite(runtime: RuntimeName): void {
  describe(`kvgate on ${runtime}`, () => {
    let gw: RunningGateway;
    let a: SimServer, b: SimServer, c: SimServer;
    let v: SimProcess;
    const url = (p: string): string => gw.url + p;
    const setHealth = (id: string, health: string): Promise<Response> =>
      fetch(url(`/admin/workers/${id}`), { method: "PATCH", headers: admin, body: JSON.stringify({ health }) });
    const workers = async (): Promise<Record<string, { health: string; ranks: { active_requests: number }[]; unreachable: boolean }>> =>
      Object.fromEntries(((await (await fetch(url("/admin/workers"), { headers: admin })).json()).data as { id: string }[]).map((w) => [w.id, w])) as never;
    const metrics = async (): Promise<string> => (await fetch(url("/metrics"))).text();
    const chat = (content: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 4, ...extra });

    beforeAll(async () => {
      gw = await startGateway(runtime, {
        KVGATE_ADMIN_TOKEN: TOKEN, KVGATE_LOG: "warn", KVGATE_TICK_MS: "50", KVGATE_HEALTH_PROBE_MS: "200", KVGATE_MAX_BODY_BYTES: "65536",
        KVGATE_INDEX_CAPACITY: "65536",
      });
      [a, b, c, v] = await Promise.all([simFor(gw.url, "A", MODEL, 50, [ADAPTER]), simFor(gw.url, "B"), simFor(gw.url, "C", OTHER_MODEL), simProcess(gw.url, "V")]);
    }, 120_000);

    afterAll(async () => {
      await Promise.all([a?.close(), b?.close(), c?.close(), v?.proc.stop(), gw?.stop()]);
    }, 30_000);

    it("should be alive but not ready, and answer 503 for a request, before any worker exists", async () => {
      expect(await (await fetch(url("/health"))).json()).toEqual({ status: "ok" });
      const ready = await fetch(url("/ready"));
      expect(ready.status).toBe(503);
      const res = await post(url("/v1/chat/completions"), { messages: [{ role: "user", content: "hi" }] });
      expect(res.status).toBe(503);
      expect((await res.json()).error).toMatchObject({ code: "KVGATE_ERR_NO_WORKERS", type: "server_error" });
    });

    it("should refuse the admin API without the right bearer token", async () => {
      const none = await fetch(url("/admin/workers"));
      expect(none.status).toBe(401);
      expect((await none.json()).error.code).toBe("KVGATE_ERR_UNAUTHORIZED");
      expect((await fetch(url("/admin/workers"), { headers: { authorization: "Bearer nope" } })).status).toBe(401);
    });

    it("should add workers (discovering models when none are given), list them and become ready", async () => {
      const add = (body: unknown) => fetch(url("/admin/workers"), { method: "POST", headers: admin, body: JSON.stringify(body) });
      const ra = await add({ url: a.url, id: "A", kv_events: true });
      expect(ra.status).toBe(201);
      expect(await ra.json()).toMatchObject({ id: "A", models: [MODEL], adapters: [ADAPTER], kv_events: true, health: "healthy" });
      expect((await add({ url: b.url, id: "B", models: [MODEL], kv_events: true })).status).toBe(201);
      expect((await add({ url: c.url, id: "C", models: [OTHER_MODEL], kv_events: true })).status).toBe(201);
      expect((await add({ url: v.url, id: "V", models: [MODEL], kv_events: true })).status).toBe(201);
      expect((await setHealth("V", "draining")).status).toBe(200);
      expect((await add({ url: a.url, id: "A" })).status).toBe(400);
      expect((await add({ id: "X" })).status).toBe(400);
      const list = await workers();
      expect(Object.keys(list).sort()).toEqual(["A", "B", "C", "V"]);
      expect(list.V!.health).toBe("draining");
      expect((await fetch(url("/ready"))).status).toBe(200);
    });

    it("should list the union of the fleet's models, adapters with their parent", async () => {
      const body = await (await fetch(url("/v1/models"))).json();
      expect(body.object).toBe("list");
      expect(body.data.map((m: { id: string; parent: string | null }) => [m.id, m.parent])).toEqual([...[MODEL, OTHER_MODEL].sort().map((m) => [m, null]), [ADAPTER, MODEL]]);
    });

    it("should complete a non-streaming chat through a worker", async () => {
      const res = await post(url("/v1/chat/completions"), chat("non-streaming chat"));
      expect(res.status).toBe(200);
      expect(["A", "B"]).toContain(res.headers.get("x-kvgate-worker"));
      const body = await res.json();
      expect(body).toMatchObject({ object: "chat.completion", model: MODEL, choices: [{ message: { role: "assistant", content: FILLER_TEXT.slice(0, 16) }, finish_reason: "length" }] });
      expect(body.usage).toMatchObject({ completion_tokens: 4, prompt_tokens_details: { cached_tokens: 0 } });
    });

    it("should route by model: the other model goes to its own worker", async () => {
      const res = await post(url("/v1/chat/completions"), { ...chat("other model"), model: OTHER_MODEL });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-kvgate-worker")).toBe("C");
    });

    it("should stream a chat as the worker sent it, without kvgate's own usage chunk", async () => {
      const res = await post(url("/v1/chat/completions"), chat("streaming chat", { stream: true, max_tokens: 5 }));
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const data = await allData(res);
      expect(data[data.length - 1]).toBe("[DONE]");
      const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
      expect(chunks).toHaveLength(6);
      expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
      expect(chunks.slice(1).map((ch) => ch.choices[0].delta.content).join("")).toBe(FILLER_TEXT.slice(0, 20));
      expect(chunks.every((ch) => ch.usage === undefined && ch.choices.length === 1)).toBe(true);
      expect(new Set(chunks.map((ch) => ch.id)).size).toBe(1);
    });

    it("should pass the usage chunk through when the client asks for it", async () => {
      const data = await allData(await post(url("/v1/chat/completions"), chat("usage please", { stream: true, stream_options: { include_usage: true } })));
      const last = JSON.parse(data[data.length - 2]!);
      expect(last.choices).toEqual([]);
      expect(last.usage).toMatchObject({ completion_tokens: 4 });
    });

    it("should complete and stream text completions", async () => {
      const whole = await post(url("/v1/completions"), { model: MODEL, prompt: "Once upon a time", max_tokens: 3 });
      expect(whole.status).toBe(200);
      expect(await whole.json()).toMatchObject({ object: "text_completion", choices: [{ text: FILLER_TEXT.slice(0, 12) }] });
      const data = await allData(await post(url("/v1/completions"), { model: MODEL, prompt: "Once upon a time", max_tokens: 3, stream: true }));
      expect(data[data.length - 1]).toBe("[DONE]");
      expect(data.slice(0, -1).map((d) => JSON.parse(d).choices[0].text).join("")).toBe(FILLER_TEXT.slice(0, 12));
    });

    it("should send a repeated prompt back to the worker whose KV events show it cached, and record the actual hit", async () => {
      const body = chat(longText("cache me"), { max_tokens: 2 });
      const first = await post(url("/v1/chat/completions"), body);
      const w = first.headers.get("x-kvgate-worker");
      await first.json();
      await until(async () => (metric(await metrics(), 'kvgate_kv_events_applied_total{status="ok"}') ?? 0) > 0, "KV events to be applied");
      const preview = await (await post(url("/v1/route"), body)).json();
      expect(preview).toMatchObject({ object: "kvgate.route", worker: w });
      expect(preview.overlap_blocks).toBeGreaterThan(0);
      const second = await post(url("/v1/chat/completions"), body);
      expect(second.headers.get("x-kvgate-worker")).toBe(w);
      expect((await second.json()).usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
      const m = await metrics();
      expect(metric(m, "kvgate_reported_cached_tokens_total")).toBeGreaterThan(0);
      expect(metric(m, "kvgate_predicted_cached_tokens_total")).toBeGreaterThan(0);
    });

    it("should route an adapter request to the worker serving it, hashed with the adapter and the tenant's cache_salt", async () => {
      const body = chat(longText("adapter prompt"), { model: ADAPTER, cache_salt: "tenant-1", max_tokens: 2 });
      const first = await post(url("/v1/chat/completions"), body);
      expect(first.status).toBe(200);
      expect(first.headers.get("x-kvgate-worker")).toBe("A");
      expect((await first.json()).model).toBe(ADAPTER);
      await until(async () => (await (await post(url("/v1/route"), body)).json()).overlap_blocks > 0, "the adapter's KV events to be applied");
      const second = await post(url("/v1/chat/completions"), body);
      expect(second.headers.get("x-kvgate-worker")).toBe("A");
      const [overlap, blocks] = second.headers.get("x-kvgate-overlap-blocks")!.split("/").map(Number);
      expect(overlap).toBeGreaterThan(0.9 * blocks!);
      const { usage } = await second.json();
      // The engine recomputes the last block of a fully cached prompt, as vLLM does.
      expect(usage.prompt_tokens_details.cached_tokens).toBe(Math.min(overlap!, Math.floor((usage.prompt_tokens - 1) / 16)) * 16);
      const preview = async (extra: Record<string, unknown>) => (await post(url("/v1/route"), { ...body, ...extra, kvgate: { worker_id: "A" } })).json();
      expect(await preview({ model: MODEL })).toMatchObject({ adapter: null, namespace: "tenant-1", overlap_blocks: 0 });
      expect(await preview({ cache_salt: "tenant-2" })).toMatchObject({ adapter: ADAPTER, namespace: "tenant-2", overlap_blocks: 0 });
      const unknown = await post(url("/v1/chat/completions"), { ...body, model: MODEL, lora_path: "no-such-adapter" });
      expect(unknown.status).toBe(404);
      expect((await unknown.json()).error.code).toBe("KVGATE_ERR_UNKNOWN_ADAPTER");
      expect((await post(url("/v1/chat/completions"), { ...body, cache_salt: 5 })).status).toBe(400);
    });

    it("should answer /v1/route with the decision and the endpoint-picker header", async () => {
      const res = await post(url("/v1/route"), chat("preview only"));
      expect(res.status).toBe(200);
      const body = await res.json();
      expect(["A", "B"]).toContain(body.worker);
      expect(res.headers.get("x-gateway-destination-endpoint")).toBe(new URL(body.endpoint).host);
    });

    it("should explain a decision with x-kvgate-explain and the admin token, in a header or /v1/route's body, and refuse it without", async () => {
      const ask = { "x-kvgate-explain": "1", authorization: admin.authorization };
      for (const stream of [false, true]) {
        const res = await post(url("/v1/chat/completions"), chat(`explain me, stream ${stream}`, { stream }), ask);
        expect(res.status).toBe(200);
        await res.text();
        const table = await parseExplainHeader(res.headers.get("x-kvgate-explain")!);
        // A and B serve the model (V is draining, C serves another): both were scored, the chosen one is the header's.
        expect(table.rows.map((r) => r[0]).sort()).toEqual(["A", "B"]);
        expect(table.rows[table.chosen]![0]).toBe(res.headers.get("x-kvgate-worker"));
      }
      const preview = await (await post(url("/v1/route"), chat("explain the preview"), ask)).json();
      expect(preview.explain.rows[preview.explain.chosen][0]).toBe(preview.worker);
      const denied = await post(url("/v1/chat/completions"), chat("explain me without the token"), { "x-kvgate-explain": "1" });
      expect(denied.status).toBe(403);
      expect((await denied.json()).error.code).toBe("KVGATE_ERR_FORBIDDEN");
    });

    it("should book a committed route plan, move it to decode at first_token, and free it at complete or cancel", async () => {
      type Rank = { active_requests: number; active_prefill_tokens: number; active_blocks: number };
      const rank = async (w: string): Promise<Rank> => {
        const { active_requests, active_prefill_tokens, active_blocks } = (await workers())[w]!.ranks[0] as unknown as Rank;
        return { active_requests, active_prefill_tokens, active_blocks };
      };
      // Counted from here: with a pool object every completion so far was a plan too.
      const m0 = await metrics();
      const grew = (m: string, series: string): number => metric(m, series)! - (metric(m0, series) ?? 0);
      const res = await post(url("/v1/route"), chat(longText("two-phase"), { commit: true }));
      expect(res.status).toBe(200);
      const plan = await res.json();
      expect(plan).toMatchObject({ object: "kvgate.route", expires_in_ms: expect.any(Number) });
      expect(plan.plan_id).toMatch(/^kvp-[0-9a-f]{32}$/);
      expect(plan.expires_in_ms).toBeGreaterThan(0);
      expect(["A", "B"]).toContain(plan.worker);
      expect(res.headers.get("x-gateway-destination-endpoint")).toBe(new URL(plan.endpoint).host);
      expect(await rank(plan.worker)).toEqual({ active_requests: 1, active_prefill_tokens: plan.prompt_tokens - plan.cached_tokens, active_blocks: plan.prompt_blocks });

      const first = await post(url(`/v1/route/${plan.plan_id}/first_token`), {});
      expect(first.status).toBe(200);
      expect(await first.json()).toMatchObject({ object: "kvgate.route_plan", plan_id: plan.plan_id, worker: plan.worker, state: "decode" });
      expect(await rank(plan.worker)).toMatchObject({ active_requests: 1, active_prefill_tokens: 0 });
      const done = await post(url(`/v1/route/${plan.plan_id}/complete`), { usage: { prompt_tokens: 40, prompt_tokens_details: { cached_tokens: 16 } } });
      expect([done.status, (await done.json()).state]).toEqual([200, "completed"]);
      expect(await rank(plan.worker)).toEqual({ active_requests: 0, active_prefill_tokens: 0, active_blocks: 0 });

      const other = await (await post(url("/v1/route"), chat("two-phase cancel", { commit: true }))).json();
      expect((await rank(other.worker)).active_requests).toBe(1);
      const cancel = await post(url(`/v1/route/${other.plan_id}/cancel`), {});
      expect([cancel.status, (await cancel.json()).state]).toEqual([200, "cancelled"]);
      expect((await rank(other.worker)).active_requests).toBe(0);

      for (const gone of [`/v1/route/${plan.plan_id}/complete`, "/v1/route/kvp-0123/first_token"]) {
        const r = await post(url(gone), {});
        expect(r.status).toBe(404);
        expect((await r.json()).error).toMatchObject({ code: "KVGATE_ERR_PLAN_NOT_FOUND", type: "not_found_error" });
      }
      const m = await metrics();
      expect(grew(m, "kvgate_route_plans_opened_total")).toBe(2);
      expect(grew(m, 'kvgate_route_plans_closed_total{outcome="completed"}')).toBe(1);
      expect(grew(m, 'kvgate_route_plans_closed_total{outcome="cancelled"}')).toBe(1);
      expect(metric(m, "kvgate_route_plans_open")).toBe(0);
    });

    it("should answer malformed, invalid, unknown and oversized requests with OpenAI errors", async () => {
      const cases: [Response, number, string][] = [
        [await post(url("/v1/chat/completions"), "{not json"), 400, "KVGATE_ERR_BAD_ARGUMENT"],
        [await post(url("/v1/chat/completions"), { model: MODEL }), 400, "KVGATE_ERR_BAD_ARGUMENT"],
        [await post(url("/v1/chat/completions"), { model: MODEL, messages: [{ role: "user", content: "x" }], kvgate: { temperature: -1 } }), 400, "KVGATE_ERR_BAD_ARGUMENT"],
        [await post(url("/v1/chat/completions"), { ...chat("x"), model: "no-such-model" }), 404, "KVGATE_ERR_UNKNOWN_MODEL"],
        [await post(url("/v1/completions"), { model: MODEL, prompt: "x".repeat(70_000) }), 413, "KVGATE_ERR_BODY_TOO_LARGE"],
        [await fetch(url("/v1/nothing-here")), 404, "KVGATE_ERR_NOT_FOUND"],
      ];
      for (const [res, status, code] of cases) {
        expect(res.status).toBe(status);
        const body = await res.json();
        expect(body.error.code).toBe(code);
        expect(typeof body.error.message).toBe("string");
      }
      expect((await fetch(url("/health"))).status).toBe(200);
    });

    it("should export Prometheus metrics", async () => {
      const m = await metrics();
      for (const name of ["kvgate_requests_total", "kvgate_time_to_first_token_seconds", "kvgate_inter_token_latency_seconds", "kvgate_predicted_hit_rate",
        "kvgate_actual_hit_rate", "kvgate_queue_pending_requests", "kvgate_worker_active_decode_blocks", "kvgate_worker_active_prefill_tokens",
        "kvgate_routing_overhead_ms", "kvgate_kv_events_applied_total"]) expect(m).toContain(`# TYPE ${name} `);
      // With a pool object the completions reach it as decisions (the Worker streams them).
      const served = runtime === "workerd-pool" ? "/v1/route" : "/v1/chat/completions";
      expect(metric(m, `kvgate_requests_total{code="200",endpoint="${served}"}`)).toBeGreaterThan(0);
      expect(m).toMatch(/kvgate_routing_overhead_ms_count\{phase="tokenize"\} \d+/);
    });

    it("should answer /v1/stats behind the admin token, with the fleet and the decisions' time series", async () => {
      const none = await fetch(url("/v1/stats"));
      expect(none.status).toBe(401);
      expect((await none.json()).error.code).toBe("KVGATE_ERR_UNAUTHORIZED");
      const res = await fetch(url("/v1/stats"), { headers: admin });
      expect(res.status).toBe(200);
      const s = await res.json();
      expect(s.object).toBe("kvgate.stats");
      expect(s.workers.map((w: { id: string }) => w.id).sort()).toEqual(["A", "B", "C", "V"]);
      expect(s.workers[0].ranks[0]).toHaveProperty("active_blocks");
      // Every completion so far was routed by this state (on workerd-pool by the pool object, through /v1/route).
      expect(s.series.requests.reduce((a: number, b: number) => a + b, 0)).toBeGreaterThan(0);
      expect(s.series.predicted_hit_rate.some((v: number | null) => v !== null)).toBe(true);
      const since = s.series.t.at(-1);
      // From that bucket on: just it, or it and the next when a 2 s bucket began between the two reads.
      const later: number[] = (await (await fetch(url(`/v1/stats?since=${since}`), { headers: admin })).json()).series.t;
      expect(later[0]).toBe(since);
      expect(later.length === 1 || (later.length === 2 && later[1]! > since)).toBe(true);
    });

    it("should serve the dashboard page with its script and charts inline", async () => {
      const res = await fetch(url("/dashboard"));
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/html/);
      const html = await res.text();
      for (const id of ["chart-hit", "chart-ttft", "chart-itl", "chart-queue", "chart-kv", "workers", "decisions"]) expect(html).toContain(`id="${id}"`);
      // The bundled client with uPlot: tens of kilobytes of inline script, nothing loaded from elsewhere.
      expect(/<script>([\s\S]*)<\/script>/.exec(html)?.[1]?.length ?? 0).toBeGreaterThan(30_000);
      expect(html).not.toMatch(/<(script|link|img)[^>]+(src|href)="(?!data:)/);
    });

    it("should cancel the worker's request and free the booking when the client goes away", async () => {
      await setHealth("A", "draining");
      await setHealth("B", "draining");
      await setHealth("V", "healthy");
      try {
        const ac = new AbortController();
        const res = await post(url("/v1/chat/completions"), chat("cancel me", { stream: true, max_tokens: 2000 }), {}, ac.signal);
        expect(res.headers.get("x-kvgate-worker")).toBe("V");
        let seen = 0;
        for await (const d of sseData(res)) if (JSON.parse(d).choices[0]?.delta?.content && ++seen === 3) break;
        ac.abort();
        await until(async () => (await workers()).V!.ranks[0]!.active_requests === 0, "the booking to be freed");
        await until(async () => metric(await (await fetch(`${v.url}/metrics`)).text(), 'vllm:num_requests_running{engine="0",model_name="conf-model"}') === 0, "the worker to stop generating");
      } finally {
        await setHealth("A", "healthy");
        await setHealth("B", "healthy");
        await setHealth("V", "draining");
      }
    });

    it("should retry on another worker when the chosen one refuses the connection", async () => {
      const port = await freePort();
      const add = await fetch(url("/admin/workers"), { method: "POST", headers: admin, body: JSON.stringify({ url: `http://127.0.0.1:${port}`, id: "D", models: [MODEL], kv_events: true }) });
      expect(add.status).toBe(201);
      // Make D the best choice: tell kvgate (as D's engine would) that D caches this prompt.
      const body = chat(longText("dead worker"), { max_tokens: 2 });
      const tokens = Array.from(simChatTokens(body));
      const blocks = Math.floor(tokens.length / 16);
      const batch = encodeKvEventBatch({ ts: 0, data_parallel_rank: 0, events: [{
        type: "BlockStored", block_hashes: Array.from({ length: blocks }, (_, i) => 900_000n + BigInt(i)), parent_block_hash: null,
        token_ids: tokens.slice(0, blocks * 16), block_size: 16, lora_id: null, medium: "GPU", lora_name: null,
      }] });
      const ingest = await fetch(url("/admin/kv-events"), { method: "POST", headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/msgpack", "x-kvgate-worker": "D" }, body: batch });
      expect(ingest.status).toBe(200);
      expect((await (await post(url("/v1/route"), body)).json()).worker).toBe("D");
      try {
        const res = await post(url("/v1/chat/completions"), body);
        expect(res.status).toBe(200);
        expect(["A", "B"]).toContain(res.headers.get("x-kvgate-worker"));
        expect((await res.json()).choices[0].message.content).toBe(FILLER_TEXT.slice(0, 8));
        expect(metric(await metrics(), 'kvgate_retries_total{reason="connect"}')).toBeGreaterThan(0);
        expect((await workers()).D).toMatchObject({ health: "unhealthy", unreachable: true });
      } finally {
        expect((await fetch(url("/admin/workers/D"), { method: "DELETE", headers: admin })).status).toBe(200);
      }
    });

    // The Worker in front of a pool object does not migrate broken streams (README, Workers deployment).
    it.skipIf(runtime === "workerd-pool")("should continue a stream on another worker when its worker is killed mid-stream", async () => {
      await setHealth("A", "draining");
      await setHealth("B", "draining");
      await setHealth("V", "healthy");
      const res = await post(url("/v1/chat/completions"), chat(longText("migrate me", 10), { stream: true, max_tokens: 300 }));
      expect(res.headers.get("x-kvgate-worker")).toBe("V");
      const chunks: { id: string; choices: { delta: { role?: string; content?: string }; finish_reason: string | null }[] }[] = [];
      let done = false;
      for await (const d of sseData(res)) {
        if (d === "[DONE]") {
          done = true;
          continue;
        }
        const ch = JSON.parse(d);
        expect(ch.error).toBeUndefined();
        chunks.push(ch);
        if (chunks.length === 6) {
          await setHealth("A", "healthy");
          await setHealth("B", "healthy");
          await v.proc.kill();
        }
      }
      expect(done).toBe(true);
      const content = chunks.filter((ch) => ch.choices[0]?.delta.content);
      expect(content).toHaveLength(300);
      expect(chunks.filter((ch) => ch.choices[0]?.delta.role !== undefined)).toHaveLength(1);
      expect(new Set(chunks.map((ch) => ch.id)).size).toBe(1);
      expect(chunks[chunks.length - 1]!.choices[0]!.finish_reason).toBe("length");
      expect(metric(await metrics(), 'kvgate_migrations_total{endpoint="chat"}')).toBe(1);
    });
  });
}
