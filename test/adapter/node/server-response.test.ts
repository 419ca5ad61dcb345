import { serve, type ServerType } from "@hono/node-server";
import { Hono } from "hono";
import { connect, type AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { headerCoalescingResponse } from "../../../src/adapter/node/server-response.ts";

/** A server whose /stream answers with a body stream that sends "first" when `release` is called, then ends. */
async function server(holdMs: number): Promise<{ port: number; release: () => void; close: () => void }> {
  let release = (): void => {};
  const app = new Hono();
  app.get("/stream", () => new Response(new ReadableStream({
    async start(c) {
      await new Promise<void>((r) => (release = r));
      c.enqueue(new TextEncoder().encode("first"));
      c.close();
    },
  }), { headers: { "content-type": "text/event-stream" } }));
  app.get("/plain", (c) => c.text("plain body"));
  const s: ServerType = await new Promise((resolve) => {
    const srv = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1", serverOptions: { ServerResponse: headerCoalescingResponse(holdMs) } }, () => resolve(srv));
  });
  return { port: (s.address() as AddressInfo).port, release: () => release(), close: () => s.close() };
}

/** Sends one HTTP/1.1 GET over a raw socket; yields every read as text. */
function rawGet(port: number, path: string): { reads: string[]; next: () => Promise<string>; done: Promise<void> } {
  const reads: string[] = [];
  const waiting: ((s: string) => void)[] = [];
  const sock = connect(port, "127.0.0.1", () => sock.write(`GET ${path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`));
  sock.on("data", (b: Buffer) => {
    const s = b.toString();
    reads.push(s);
    waiting.shift()?.(s);
  });
  const done = new Promise<void>((r) => sock.on("close", () => r()));
  let taken = 0;
  return {
    reads, done,
    next: () => (taken < reads.length ? Promise.resolve(reads[taken++]!) : new Promise((r) => waiting.push((s) => { taken++; r(s); }))),
  };
}

let closeServer = (): void => {};
afterEach(() => closeServer());

describe("headerCoalescingResponse", () => {
  it("sends a stream's headers in the same write as its first chunk", async () => {
    const s = await server(60_000);
    closeServer = s.close;
    const c = rawGet(s.port, "/stream");
    await new Promise((r) => setTimeout(r, 50)); // the handler has returned; the headers are held
    expect(c.reads).toEqual([]);
    s.release();
    const first = await c.next();
    expect(first).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(first).toMatch(/content-type: text\/event-stream/i);
    expect(first).toContain("\r\n\r\n5\r\nfirst\r\n");
    await c.done;
  });

  it("still sends the headers on their own when the first chunk is slow", async () => {
    const s = await server(5);
    closeServer = s.close;
    const c = rawGet(s.port, "/stream");
    const head = await c.next(); // arrives while the body is still held back
    expect(head).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n$/);
    s.release();
    expect(await c.next()).toContain("5\r\nfirst\r\n");
    await c.done;
  });

  it("leaves whole answers alone", async () => {
    const s = await server(60_000);
    closeServer = s.close;
    const c = rawGet(s.port, "/plain");
    await c.done;
    const all = c.reads.join("");
    expect(all).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(all.endsWith("plain body")).toBe(true);
  });
});
