/**
 * @module Test helpers for tracing: a loopback OTLP/HTTP receiver that keeps every JSON body it is sent, and a
 * simulated engine behind a pass-through front that records the headers each request reached it with.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { realClock } from "../../src/sim/sim-clock.ts";

export interface OtlpSpan {
  traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; startTimeUnixNano: string; endTimeUnixNano: string;
  attributes: { key: string; value: Record<string, unknown> }[]; status: { code: number };
}

/** A loopback OTLP/HTTP receiver: every POSTed JSON body, and the spans in them. */
export async function otlpReceiver(): Promise<{ url: string; bodies: unknown[]; spans: () => OtlpSpan[]; service: () => string[]; close(): Promise<void> }> {
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
export async function recordedEngine(gatewayUrl: string, id: string, model: string, token = "test-token"): Promise<{ sim: SimServer; url: string; seen: Headers[]; close(): Promise<void> }> {
  const sim = await startSimServer({
    clock: realClock(), speedupRatio: 50, numGpuBlocks: 2048, maxModelLen: 8192, model, workerId: id,
    events: { url: `${gatewayUrl}/admin/kv-events`, token, flushIntervalMs: 5 },
  });
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


export const attr = (s: OtlpSpan, key: string): unknown => Object.values(s.attributes.find((a) => a.key === key)?.value ?? {})[0];

/** Marks where each engine's record stands; `since` then lists only the requests that arrived after it. */
export function mark(engines: readonly { seen: Headers[] }[]): { since(): Headers[] } {
  const at = engines.map((e) => e.seen.length);
  return { since: () => engines.flatMap((e, i) => e.seen.slice(at[i])) };
}
