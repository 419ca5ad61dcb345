/**
 * @module Reference target of bench/gateway.ts: the smallest reverse proxy Hono offers (`hono/proxy`, streaming the
 * body through) in front of one worker, on Node or Bun — the cost any JavaScript gateway pays for the extra HTTP
 * hop, against which kvgate's own work (parsing, tokenizing, routing, watching the stream) can be read. On Node it
 * reaches the worker over the same node:http transport as kvgate's Node adapter, so the two differ only by kvgate.
 * Usage: `node --import tsx bench/hono-proxy.ts <worker-url>` or `bun bench/hono-proxy.ts <worker-url>`.
 */
import { Hono } from "hono";
import { proxy } from "hono/proxy";

declare const Bun: { serve(o: { fetch: (r: Request) => Response | Promise<Response>; port: number; hostname: string; idleTimeout: number }): { port: number } } | undefined;

const upstream = process.argv[2];
if (!upstream) throw new Error("usage: hono-proxy.ts <worker-url>");
const listening = (port: number): void => console.log(`proxy listening on http://127.0.0.1:${port}`);
if (typeof Bun !== "undefined") {
  const app = new Hono();
  app.all("*", (c) => proxy(upstream + c.req.path, { raw: c.req.raw }));
  listening(Bun.serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1", idleTimeout: 0 }).port);
} else {
  const { serve } = await import("@hono/node-server");
  const { createNodeHttpFetch } = await import("../src/adapter/node/http-fetch.ts");
  const transport = createNodeHttpFetch();
  const app = new Hono();
  app.all("*", (c) => proxy(upstream + c.req.path, {
    raw: c.req.raw,
    // hono/proxy hands over a Request; the transport takes a URL and a buffered body, as kvgate sends them.
    customFetch: async (req) => transport.fetch(req.url, { method: req.method, headers: req.headers, body: req.body ? await req.text() : undefined, signal: req.signal }),
  }));
  serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => listening(info.port));
}
