/**
 * @module Acceptance 2 of issue 17 on Node: a gateway configured by the standard OTEL_* variables exports one trace per
 * request to a loopback OTLP/HTTP receiver started here, with the named spans and correct parent/child links, and the
 * simulated engine (served over HTTP, behind a recording front) receives a traceparent of the same trace.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tracingConfigFromEnv } from "../../src/observability/otel-config.ts";
import { formatTraceparent, parseTraceparent } from "../../src/observability/traceparent.ts";
import { post, sseData, startTestGateway, type TestGateway } from "../gateway/helpers.ts";
import { attr, mark, otlpReceiver as receiver, recordedEngine, type OtlpSpan } from "./otlp-receiver.ts";

const MODEL = "sim-model";

let otlp: Awaited<ReturnType<typeof receiver>>;
let gw: TestGateway;
const engines: Awaited<ReturnType<typeof recordedEngine>>[] = [];

beforeAll(async () => {
  otlp = await receiver();
  gw = await startTestGateway([], { otelEnv: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SERVICE_NAME: "kvgate-test", OTEL_BSP_SCHEDULE_DELAY: "20" } });
  for (let i = 0; i < 2; i++) {
    const e = await recordedEngine(gw.url, `e${i}`, MODEL);
    engines.push(e);
    await gw.gateway.state.fleet.add({ url: e.url, id: `e${i}`, models: [MODEL], kvEvents: true, blockSize: 16 });
  }
});

afterAll(async () => {
  await Promise.allSettled(engines.map((e) => e.close()));
  await gw?.close();
  await otlp?.close();
});

const chat = (content: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 4, ...extra });

async function traceOf(traceId: string, names: string[]): Promise<OtlpSpan[]> {
  for (let i = 0; i < 100; i++) {
    await gw.gateway.state.tracing.flush();
    const spans = otlp.spans().filter((s) => s.traceId === traceId);
    if (names.every((n) => spans.some((s) => s.name === n))) return spans;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`trace ${traceId} lacks some of ${names.join(", ")}: has ${otlp.spans().filter((s) => s.traceId === traceId).map((s) => s.name).join(", ")}`);
}

describe("OpenTelemetry traces over OTLP/HTTP", () => {
  it("continues the client's trace: kvgate.request under its traceparent, the phases under the request, the engine under dispatch", async () => {
    const client = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: 1 };
    const before = mark(engines);
    const res = await post(`${gw.url}/v1/chat/completions`, chat("a traced request about caching and routing"), { traceparent: formatTraceparent(client) });
    expect(res.status).toBe(200);
    await res.json();
    const spans = await traceOf(client.traceId, ["kvgate.request", "kvgate.tokenize", "kvgate.hash_match", "kvgate.schedule", "kvgate.dispatch", "kvgate.stream_end"]);
    const root = spans.find((s) => s.name === "kvgate.request")!;
    expect(root.parentSpanId).toBe(client.spanId);
    expect(root.kind).toBe(2);
    expect(attr(root, "http.response.status_code")).toBe("200");
    expect(spans.filter((s) => s.name === "kvgate.request")).toHaveLength(1);
    for (const s of spans.filter((x) => x !== root)) expect(s.parentSpanId, s.name).toBe(root.spanId);
    const schedule = spans.find((s) => s.name === "kvgate.schedule")!;
    expect(attr(schedule, "kvgate.worker")).toBe(res.headers.get("x-kvgate-worker"));
    expect(typeof attr(schedule, "kvgate.cost")).not.toBe("undefined");
    expect(attr(schedule, "kvgate.overlap_blocks")).toBeDefined();
    for (const s of spans) expect(BigInt(s.endTimeUnixNano) >= BigInt(s.startTimeUnixNano)).toBe(true);
    const dispatch = spans.find((s) => s.name === "kvgate.dispatch")!;
    expect(dispatch.kind).toBe(3);
    const got = before.since();
    expect(got).toHaveLength(1);
    const upstream = parseTraceparent(got[0]!.get("traceparent"))!;
    expect(upstream.traceId).toBe(client.traceId);
    expect(upstream.spanId).toBe(dispatch.spanId);
    expect(otlp.service()).toContain("kvgate-test");
  });

  it("starts a trace per request without a traceparent, with first_token and stream_end for a stream", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const before = mark(engines);
      const res = await post(`${gw.url}/v1/chat/completions`, chat(`streamed request ${i}`, { stream: true }));
      expect((await sseData(res)).at(-1)).toBe("[DONE]");
      const tp = parseTraceparent(before.since()[0]!.get("traceparent"))!;
      ids.push(tp.traceId);
      const spans = await traceOf(tp.traceId, ["kvgate.request", "kvgate.first_token", "kvgate.stream_end", "kvgate.dispatch"]);
      const root = spans.find((s) => s.name === "kvgate.request")!;
      expect(root.parentSpanId).toBeUndefined();
      expect(spans.filter((s) => s.name === "kvgate.request")).toHaveLength(1);
      for (const s of spans.filter((x) => x !== root)) expect(s.parentSpanId).toBe(root.spanId);
    }
    expect(new Set(ids).size).toBe(3);
  });

  it("ends the request span with the error a failed request got", async () => {
    const res = await post(`${gw.url}/v1/chat/completions`, chat("to nowhere", { kvgate: { worker_id: "missing" } }), { traceparent: "00-11112222333344445555666677778888-1111222233334444-01" });
    expect(res.status).toBeGreaterThanOrEqual(400);
    const root = (await traceOf("11112222333344445555666677778888", ["kvgate.request"])).find((s) => s.name === "kvgate.request")!;
    expect(attr(root, "http.response.status_code")).toBe(String(res.status));
    expect(root.status.code).toBe(res.status >= 500 ? 2 : 0);
  });

  it("makes no spans when OTEL_* names no endpoint, and passes the client's traceparent through untouched", async () => {
    const plain = await startTestGateway([], { otelEnv: {} });
    try {
      expect(plain.gateway.state.tracing.tracer).toBeUndefined();
      await plain.gateway.state.fleet.add({ url: engines[0]!.url, id: "e0", models: [MODEL], kvEvents: false, blockSize: 16 });
      const tp = "00-aaaabbbbccccddddeeeeffff00001111-2222333344445555-01";
      const before = engines[0]!.seen.length;
      const res = await post(`${plain.url}/v1/chat/completions`, chat("untraced"), { traceparent: tp });
      await res.arrayBuffer();
      expect(engines[0]!.seen[before]!.get("traceparent")).toBe(tp);
    } finally {
      await plain.close();
    }
  });
});

describe("traceparent and OTEL_* parsing", () => {
  it("reads valid traceparents and refuses malformed ones", () => {
    expect(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")).toEqual({ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: 1, isRemote: true });
    expect(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")?.traceFlags).toBe(0);
    for (const bad of [undefined, "", "00-0000000000000000000000000000000-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "garbage"]) expect(parseTraceparent(bad)).toBeUndefined();
    expect(parseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future")?.spanId).toBe("00f067aa0ba902b7");
  });

  it("configures from the standard variables", () => {
    expect(tracingConfigFromEnv({})).toBeUndefined();
    expect(tracingConfigFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" })).toBeUndefined();
    expect(tracingConfigFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" })).toBeUndefined();
    const c = tracingConfigFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/", OTEL_EXPORTER_OTLP_HEADERS: "api-key=a%20b,x=1", OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.25", OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod" })!;
    expect(c.url).toBe("http://c:4318/v1/traces");
    expect(c.headers).toEqual({ "api-key": "a b", x: "1" });
    expect(c.sampler).toBe("parentbased_traceidratio");
    expect(c.ratio).toBe(0.25);
    expect(c.resource).toEqual({ "deployment.environment": "prod", "service.name": "kvgate" });
    expect(tracingConfigFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:1/custom" })!.url).toBe("http://t:1/custom");
    expect(() => tracingConfigFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c", OTEL_TRACES_SAMPLER: "sometimes" })).toThrow(/OTEL_TRACES_SAMPLER/);
    expect(() => tracingConfigFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c", OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "2" })).toThrow(/ratio/);
    expect(() => tracingConfigFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(/JSON/);
  });
});
