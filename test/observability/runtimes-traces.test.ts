/**
 * @module Traces and the explain header on the other runtimes: kvgate under Bun and under workerd (as a real process,
 * configured only by its environment, OTEL_* included) exports each request's spans to a loopback OTLP receiver and
 * sends the engine a traceparent of the same trace; x-kvgate-explain carries the candidates table. (The workerd
 * pool-object deployment decides in the Durable Object and relays itself: it makes no spans yet.)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseExplainHeader } from "../../src/gateway/explain.ts";
import { formatTraceparent, parseTraceparent } from "../../src/observability/traceparent.ts";
import { startGateway, type RunningGateway } from "../conformance/runtimes.ts";
import { mark, otlpReceiver, recordedEngine, type OtlpSpan } from "./otlp-receiver.ts";

const MODEL = "rt-model";
const TOKEN = "rt-token";

for (const runtime of ["bun", "workerd"] as const) {
  describe(`tracing on ${runtime}`, () => {
    let otlp: Awaited<ReturnType<typeof otlpReceiver>>;
    let gw: RunningGateway;
    const engines: Awaited<ReturnType<typeof recordedEngine>>[] = [];
    const auth = { authorization: `Bearer ${TOKEN}` };

    beforeAll(async () => {
      otlp = await otlpReceiver();
      gw = await startGateway(runtime, {
        KVGATE_ADMIN_TOKEN: TOKEN, KVGATE_LOG: "warn", OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SERVICE_NAME: `kvgate-${runtime}`, OTEL_BSP_SCHEDULE_DELAY: "20",
      });
      for (const id of ["r0", "r1"]) {
        const e = await recordedEngine(gw.url, id, MODEL, TOKEN);
        engines.push(e);
        const add = await fetch(`${gw.url}/admin/workers`, { method: "POST", headers: auth, body: JSON.stringify({ url: e.url, id, models: [MODEL], kv_events: true }) });
        expect(add.status).toBe(201);
      }
    }, 120_000);

    afterAll(async () => {
      await Promise.allSettled([...engines.map((e) => e.close()), gw?.stop(), otlp?.close()]);
    }, 30_000);

    async function spansOf(traceId: string, names: string[]): Promise<OtlpSpan[]> {
      for (let i = 0; i < 150; i++) {
        const spans = otlp.spans().filter((s) => s.traceId === traceId);
        if (names.every((n) => spans.some((s) => s.name === n))) return spans;
        // Workers send queued spans under waitUntil at the end of a request: any request lets them go.
        await fetch(`${gw.url}/health`);
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`${runtime}: trace ${traceId} has ${otlp.spans().filter((s) => s.traceId === traceId).map((s) => s.name).join(", ") || "no spans"}`);
    }

    for (const stream of [false, true]) {
      it(`exports a ${stream ? "streamed" : "whole"} request's trace and propagates its traceparent`, async () => {
        const client = { traceId: `${stream ? "5" : "6"}bf92f3577b34da6a3ce929d0e0e4736`, spanId: "00f067aa0ba902b7", traceFlags: 1 };
        const before = mark(engines);
        const res = await fetch(`${gw.url}/v1/chat/completions`, {
          method: "POST", headers: { "content-type": "application/json", traceparent: formatTraceparent(client), "x-kvgate-explain": "1", ...auth },
          body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: `traced on ${runtime}, stream ${stream}` }], max_tokens: 3, stream }),
        });
        expect(res.status).toBe(200);
        await res.text();
        const table = await parseExplainHeader(res.headers.get("x-kvgate-explain")!);
        expect(table.rows.map((r) => r[0]).sort()).toEqual(["r0", "r1"]);
        expect(table.worker).toBe(res.headers.get("x-kvgate-worker"));
        const names = ["kvgate.request", "kvgate.tokenize", "kvgate.hash_match", "kvgate.schedule", "kvgate.dispatch", "kvgate.stream_end", ...(stream ? ["kvgate.first_token"] : [])];
        const spans = await spansOf(client.traceId, names);
        const root = spans.find((s) => s.name === "kvgate.request")!;
        expect(root.parentSpanId).toBe(client.spanId);
        for (const s of spans.filter((x) => x !== root)) expect(s.parentSpanId, s.name).toBe(root.spanId);
        const tp = parseTraceparent(before.since()[0]!.get("traceparent"))!;
        expect(tp.traceId).toBe(client.traceId);
        expect(tp.spanId).toBe(spans.find((s) => s.name === "kvgate.dispatch")!.spanId);
        expect(otlp.service()).toContain(`kvgate-${runtime}`);
      });
    }
  });
}
