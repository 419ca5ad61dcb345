/**
 * @module Reference target of bench/gateway.ts: the smallest reverse proxy Hono offers (`hono/proxy`, streaming the
 * body through) in front of one worker, on Node or Bun — the cost any JavaScript gateway pays for the extra HTTP
 * hop, against which kvgate's own work (parsing, tokenizing, routing, watching the stream) can be read.
 * Usage: `node --import tsx bench/hono-proxy.ts <worker-url>` or `bun bench/hono-proxy.ts <worker-url>`.
 */
import { Hono } from "hono";
import { proxy } from "hono/proxy";

declare const Bun: { serve(o: { fetch: (r: Request) => Response | Promise<Response>; port: number; hostname: string; idleTimeout: number }): { port: number } } | undefined;

const upstream = process.argv[2];
if (!upstream) throw new Error("usage: hono-proxy.ts <worker-url>");
const app = new Hono();
app.all("*", (c) => proxy(upstream + c.req.path, { raw: c.req.raw }));
const listening = (port: number): void => console.log(`proxy listening on http://127.0.0.1:${port}`);
if (typeof Bun !== "undefined") {
  listening(Bun.serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1", idleTimeout: 0 }).port);
} else {
  const { serve } = await import("@hono/node-server");
  serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => listening(info.port));
}
