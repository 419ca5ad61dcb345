/**
 * @module Acceptance 2 of issue 17 on Node: a gateway configured by the standard OTEL_* variables exports one trace per
 * request to a loopback OTLP/HTTP receiver started here, with the named spans and correct parent/child links, and the
 * simulated engine (served over HTTP, behind a recording front) receives a traceparent of the same trace.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimServer } from "../../src/adapter/node/sim-server.ts";
import { tracingConfigFromEnv } from "../../src/observability/otel-config.ts";
import { formatTraceparent, parseTraceparent } from "../../src/observability/traceparent.ts";
import { post, sseData, startSim, startTestGateway, type TestGateway } from "../gateway/helpers.ts";

const MODEL = "sim-model";

interface OtlpSpan {
  traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; startTimeUnixNano: string; endTimeUnixNano: string;
  attributes: { key: string; value: Record<string, unknown> }[]; status: { code: number };
}

/** A loopback OTLP/HTTP receiver: every POSTed JSON body, and the spans in them. */
async function receiver(): Promise<{ url: string; bodies: unknown[]; spans: () => OtlpSpan[]; service: () => string[]; close(): Promise<void> }> {
  const bodies: { resourceSpans: { resource: { attributes: { key: string; value: { stringValue: string } }[] }; scopeSpans: { spans: OtlpSpan[] }[] }[] }[] = [];
  const server: Server = createServer((req: IncomingMessage, res) => {
    let text = "";
    req.on("data", (c) => (text += c));
    req.on("end", () => {
      if (req.url === "/v1/traces" && req.headers["content-type"] === "application/json") bodies.push(JSON.parse(text));
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies,
    spans: () => bodies.flatMap((b) => b.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))),
    service: () => bodies.flatMap((b) => b.resourceSpans.map((r) => r.resource.attributes.find((a) => a.key === "service.name")!.value.stringValue)),
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** An engine behind a pass-through front that records the headers each request arrived with. */
async function recordedEngine(gatewayUrl: string, id: string): Promise<{ sim: SimServer; url: string; seen: Headers[]; close(): Promise<void> }> {
  const sim = await startSim(gatewayUrl, { model: MODEL, workerId: id });
  const seen: Headers[] = [];
  const front = await new Promise<Server>((resolve) => {
    const s = serve({ port: 0, hostname: "127.0.0.1", fetch: async (req) => {
      const u = new URL(req.url);
      if (u.pathname.startsWith("/v1/")) seen.push(req.headers);
      return fetch(sim.url + u.pathname + u.search, { method: req.method, headers: req.headers, body: req.method === "GET" ? undefined : await req.text() });
    } }, () => resolve(s as Server)) as Server;
  });
  return { sim, seen, url: `http://127.0.0.1:${(front.address() as AddressInfo).port}`, close: async () => {
    await new Promise<void>((r) => { front.close(() => r()); front.closeAllConnections(); });
    await sim.close();
  } };
}

let otlp: Awaited<ReturnType<typeof receiver>>;
let gw: TestGateway;
const engines: Awaited<ReturnType<typeof recordedEngine>>[] = [];

beforeAll(async () => {
  otlp = await receiver();
  gw = await startTestGateway([], { otelEnv: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SERVICE_NAME: "kvgate-test", OTEL_BSP_SCHEDULE_DELAY: "20" } });
  for (let i = 0; i < 2; i++) {
    const e = await recordedEngine(gw.url, `e${i}`);
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
const attr = (s: OtlpSpan, key: string): unknown => Object.values(s.attributes.find((a) => a.key === key)?.value ?? {})[0];

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
    const before = engines.flatMap((e) => e.seen).length;
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
    const got = engines.flatMap((e) => e.seen).slice(before);
    expect(got).toHaveLength(1);
    const upstream = parseTraceparent(got[0]!.get("traceparent"))!;
    expect(upstream.traceId).toBe(client.traceId);
    expect(upstream.spanId).toBe(dispatch.spanId);
    expect(otlp.service()).toContain("kvgate-test");
  });

  it("starts a trace per request without a traceparent, with first_token and stream_end for a stream", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const before = engines.flatMap((e) => e.seen).length;
      const res = await post(`${gw.url}/v1/chat/completions`, chat(`streamed request ${i}`, { stream: true }));
      expect((await sseData(res)).at(-1)).toBe("[DONE]");
      const tp = parseTraceparent(engines.flatMap((e) => e.seen).slice(before)[0]!.get("traceparent"))!;
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
