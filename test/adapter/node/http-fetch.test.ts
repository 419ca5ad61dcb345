import http from "node:http";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNodeHttpFetch } from "../../../src/adapter/node/http-fetch.ts";
import { hasBody, openBody, type BodyReader } from "../../../src/gateway/direct-source.ts";

/** A loopback server with one route per behaviour the transport must reproduce as fetch would. */
let server: http.Server;
let base: string;
const transport = createNodeHttpFetch();
const f = transport.fetch;

beforeAll(async () => {
  const served = new WeakSet<object>();
  server = http.createServer((req, res) => {
    if (req.url === "/once-per-socket" || req.url === "/reset") {
      // A connection closed as a kept-alive socket is reused (the worker's idle close racing our next request).
      if (served.has(req.socket) || req.url === "/reset") return void req.socket.destroy();
      served.add(req.socket);
      res.end("fresh");
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString();
      switch (req.url) {
        case "/echo":
          res.setHeader("content-type", "application/json");
          res.setHeader("set-cookie", ["a=1", "b=2"]);
          res.end(JSON.stringify({ method: req.method, body, type: req.headers["content-type"], custom: req.headers["x-custom"], length: req.headers["content-length"] }));
          return;
        case "/sse": {
          res.writeHead(200, { "content-type": "text/event-stream" });
          let i = 0;
          const t = setInterval(() => {
            res.write(`data: ${i}\n\n`);
            if (++i === 5) {
              clearInterval(t);
              res.end("data: [DONE]\n\n");
            }
          }, 5);
          return;
        }
        case "/big":
          res.writeHead(200, { "content-type": "application/octet-stream" });
          res.end(Buffer.alloc(3 << 20, 7));
          return;
        case "/gzip":
          res.writeHead(200, { "content-encoding": "gzip", "content-type": "text/plain" });
          res.end(gzipSync("hello, compressed"));
          return;
        case "/empty":
          res.writeHead(204);
          res.end();
          return;
        case "/redirect":
          res.writeHead(307, { location: "/echo" });
          res.end();
          return;
        case "/cut":
          res.writeHead(200, { "content-type": "text/event-stream" });
          res.write("data: partial\n\n");
          setTimeout(() => res.socket?.destroy(), 20);
          return;
        case "/slow-stream":
          res.writeHead(200, { "content-type": "text/event-stream" });
          res.write("data: start\n\n");
          setTimeout(() => res.end("data: [DONE]\n\n"), 5_000).unref();
          return;
        case "/slow":
          setTimeout(() => res.end("late"), 2_000);
          return;
        case "/status":
          res.writeHead(503, "Busy", { "retry-after": "1" });
          res.end("busy");
          return;
        default:
          res.writeHead(404);
          res.end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => {
  transport.close();
  server.closeAllConnections();
  server.close();
});

async function drain(reader: BodyReader): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  for (;;) {
    const r = await reader.read();
    if (r.done) return out;
    out.push(r.value);
  }
}

async function text(body: ReadableStream<Uint8Array>): Promise<string> {
  return new Response(body).text();
}

describe("node:http transport", () => {
  it("sends method, headers and body and returns status, headers (repeated ones too) and body", async () => {
    const res = await f(`${base}/echo`, { method: "POST", headers: { "content-type": "application/json", "x-custom": "yes" }, body: '{"a":"é"}' });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(res.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
    expect(await res.json()).toEqual({ method: "POST", body: '{"a":"é"}', type: "application/json", custom: "yes", length: "10" });
    const bytes = await f(`${base}/echo`, { method: "POST", body: new TextEncoder().encode("raw") });
    expect((await bytes.json()).body).toBe("raw");
  });

  it("streams chunks as they arrive and reuses the connection", async () => {
    for (let round = 0; round < 3; round++) {
      const res = await f(`${base}/sse`);
      const reader = res.body!.getReader();
      const seen: string[] = [];
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        seen.push(new TextDecoder().decode(r.value));
      }
      expect(seen.length).toBeGreaterThan(1);
      expect(seen.join("")).toBe("data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\ndata: [DONE]\n\n");
    }
  });

  it("delivers a large body whole through backpressure", async () => {
    const res = await f(`${base}/big`);
    const buf = new Uint8Array(await res.arrayBuffer());
    expect(buf.length).toBe(3 << 20);
    expect(buf.every((b) => b === 7)).toBe(true);
  });

  it("decodes gzip, answers null-body statuses, follows redirects and keeps error statuses", async () => {
    const gz = await f(`${base}/gzip`);
    expect(gz.headers.get("content-encoding")).toBeNull();
    expect(await gz.text()).toBe("hello, compressed");
    const empty = await f(`${base}/empty`);
    expect([empty.status, empty.body]).toEqual([204, null]);
    const moved = await f(`${base}/redirect`, { method: "POST", body: "again" });
    expect(await moved.json()).toMatchObject({ method: "POST", body: "again" });
    const busy = await f(`${base}/status`);
    expect([busy.status, busy.statusText, busy.headers.get("retry-after"), await busy.text()]).toEqual([503, "Busy", "1", "busy"]);
  });

  it("rejects as fetch does: refused connections with the cause's code, aborts with the signal's reason", async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const refused = await f(`http://127.0.0.1:${port}/x`).catch((e: unknown) => e as TypeError & { cause: { code: string } });
    expect(refused).toBeInstanceOf(TypeError);
    expect((refused as { cause: { code: string } }).cause.code).toBe("ECONNREFUSED");

    const early = new AbortController();
    const pending = f(`${base}/slow`, { signal: early.signal });
    setTimeout(() => early.abort(new Error("gave up")), 20);
    await expect(pending).rejects.toThrow("gave up");
    await expect(f(`${base}/echo`, { signal: AbortSignal.abort(new Error("before")) })).rejects.toThrow("before");
  });

  it("fails the body read when the worker dies mid-stream or the caller aborts mid-body", async () => {
    const cut = await f(`${base}/cut`);
    await expect(text(cut.body!)).rejects.toThrow();

    const ctl = new AbortController();
    const res = await f(`${base}/sse`, { signal: ctl.signal });
    const reader = res.body!.getReader();
    await reader.read();
    ctl.abort(new Error("client left"));
    await expect((async () => {
      for (;;) if ((await reader.read()).done) return "ended";
    })()).rejects.toThrow("client left");
  });

  it("resends once on a fresh connection when a reused one was closed under it, and never for a fresh one", async () => {
    const t = createNodeHttpFetch({ maxSockets: 1 });
    expect(await (await t.fetch(`${base}/once-per-socket`)).text()).toBe("fresh");
    // Same pooled socket again: the server drops it; the transport goes again on a new connection.
    expect(await (await t.fetch(`${base}/once-per-socket`, { method: "POST", body: "x" })).text()).toBe("fresh");
    const fresh = createNodeHttpFetch();
    const err = (await fresh.fetch(`${base}/reset`).then(() => undefined, (e: unknown) => e)) as TypeError & { cause?: { code?: string } };
    expect(err).toBeInstanceOf(TypeError);
    expect(err.cause?.code).toBe("ECONNRESET");
    t.close();
    fresh.close();
  });

  it("lets the relay read a body straight from the socket, and the body one way only", async () => {
    for (let round = 0; round < 3; round++) {
      const res = await f(`${base}/sse`);
      expect(hasBody(res)).toBe(true);
      const reader = openBody(res)!;
      // The first reader chooses: the web stream now refuses, and a second direct reader is not given.
      expect((res as unknown as Record<symbol, () => unknown>)[Symbol.for("kvgate.direct-body")]!()).toBeUndefined();
      const streamed = res.body!.getReader().read().then(() => "read", (e: Error) => e.message);
      const chunks = await drain(reader);
      expect(await streamed).toMatch("direct reader");
      expect(Buffer.concat(chunks).toString()).toBe("data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\ndata: [DONE]\n\n");
      expect(await reader.read()).toEqual({ done: true, value: undefined });
    }
    // Read the web way first: no direct reader afterwards, the stream as before.
    const res = await f(`${base}/sse`);
    const web = res.body!.getReader();
    const first = await web.read();
    expect(first.done).toBe(false);
    expect(() => openBody(res)).toThrow("locked");
    const big = await f(`${base}/big`);
    const whole = Buffer.concat(await drain(openBody(big)!));
    expect(whole.length).toBe(3 << 20);
    expect(whole.every((b) => b === 7)).toBe(true);
    await web.cancel();
  });

  it("fails a direct read when the worker dies mid-stream or the caller aborts, and cancels by closing the connection", async () => {
    await expect(drain(openBody(await f(`${base}/cut`))!)).rejects.toThrow("terminated");
    const ctl = new AbortController();
    const res = await f(`${base}/sse`, { signal: ctl.signal });
    const reader = openBody(res)!;
    await reader.read();
    ctl.abort(new Error("client left"));
    await expect(drain(reader)).rejects.toThrow("client left");
    const left = openBody(await f(`${base}/slow-stream`))!;
    expect(Buffer.from((await left.read()).value!).toString()).toBe("data: start\n\n");
    const pending = left.read();
    await left.cancel();
    expect(await pending).toEqual({ done: true, value: undefined });
  });

  it("hands anything it does not cover to the fallback", async () => {
    const seen: string[] = [];
    const t = createNodeHttpFetch({ fallback: async (input) => (seen.push(String(input instanceof Request ? input.url : input)), new Response("fallback")) });
    expect(await (await t.fetch(new Request(`${base}/echo`))).text()).toBe("fallback");
    expect(await (await t.fetch(`${base}/echo`, { method: "POST", body: new ReadableStream() as unknown as BodyInit, duplex: "half" } as RequestInit)).text()).toBe("fallback");
    expect(await (await t.fetch("data:text/plain,x")).text()).toBe("fallback");
    expect(seen).toHaveLength(3);
    t.close();
  });
});
