import { serve, type ServerType } from "@hono/node-server";
import { Hono } from "hono";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { directStreams } from "../../../src/adapter/node/direct-response.ts";
import { headerCoalescingResponse } from "../../../src/adapter/node/server-response.ts";
import { attachDirectSource, type ChunkSink } from "../../../src/gateway/direct-source.ts";

const enc = new TextEncoder();
let server: ServerType | undefined;
afterEach(() => {
  server?.close();
  (server as { closeAllConnections?: () => void } | undefined)?.closeAllConnections?.();
  server = undefined;
});

/** A response whose body stream fails when read, so an answer that arrives proves it came through the source. */
function sourced(pull: (sink: ChunkSink) => Promise<void>, init: ResponseInit, onCancel = (): void => {}): Response {
  const body = new ReadableStream<Uint8Array>({ pull: () => Promise.reject(new Error("read through the stream")) }, { highWaterMark: 0 });
  const res = new Response(body, init);
  let taken = false;
  attachDirectSource(res, () => {
    if (taken) return undefined;
    taken = true;
    return { pull, cancel: onCancel };
  });
  return res;
}

async function start(app: Hono): Promise<string> {
  const s: ServerType = await new Promise((resolve) => {
    const srv = serve({ fetch: directStreams(app.fetch), port: 0, hostname: "127.0.0.1", serverOptions: { ServerResponse: headerCoalescingResponse() } }, () => resolve(srv));
  });
  server = s;
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

describe("directStreams", () => {
  it("writes a sourced stream's chunks, status and headers straight to the socket", async () => {
    const app = new Hono();
    app.get("/s", () => {
      let i = 0;
      const headers = new Headers({ "content-type": "text/event-stream", "x-kvgate-worker": "w1" });
      headers.append("set-cookie", "a=1");
      headers.append("set-cookie", "b=2");
      return sourced(async (sink) => {
        await new Promise((r) => setTimeout(r, 1));
        if (i < 5) sink.enqueue(enc.encode(`data: ${i++}\n\n`));
        else sink.close();
      }, { status: 201, headers });
    });
    const res = await fetch(`${await start(app)}/s`);
    expect(res.status).toBe(201);
    expect(res.headers.get("x-kvgate-worker")).toBe("w1");
    expect(res.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
    expect(await res.text()).toBe("data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n");
  });

  it("leaves plain answers and streams without a source to @hono/node-server", async () => {
    const app = new Hono();
    app.get("/plain", (c) => c.text("plain body"));
    app.get("/stream", () => new Response(new ReadableStream({
      start(c) {
        c.enqueue(enc.encode("streamed"));
        c.close();
      },
    }), { headers: { "content-type": "text/event-stream" } }));
    const base = await start(app);
    expect(await (await fetch(`${base}/plain`)).text()).toBe("plain body");
    expect(await (await fetch(`${base}/stream`)).text()).toBe("streamed");
  });

  it("stops pulling when the client goes away, and the request's signal says so", async () => {
    const app = new Hono();
    let signal: AbortSignal | undefined;
    let pulls = 0;
    let firstSent: () => void = () => {};
    const sent = new Promise<void>((r) => (firstSent = r));
    app.get("/s", (c) => {
      signal = c.req.raw.signal;
      return sourced(async (sink) => {
        pulls++;
        if (pulls === 1) {
          sink.enqueue(enc.encode("data: first\n\n"));
          firstSent();
          return;
        }
        // Like the relay: a client that went away cancels the body, and pull returns with nothing.
        await new Promise<void>((r) => (signal!.aborted ? r() : signal!.addEventListener("abort", () => r(), { once: true })));
      }, { headers: { "content-type": "text/event-stream" } });
    });
    const ctl = new AbortController();
    const res = await fetch(`${await start(app)}/s`, { signal: ctl.signal });
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe("data: first\n\n");
    await sent;
    ctl.abort();
    await expect.poll(() => signal?.aborted).toBe(true);
    await expect.poll(() => pulls).toBe(2);
    // The pump ended on the empty pull (or on the closed socket), never asking for more.
    await new Promise((r) => setTimeout(r, 20));
    expect(pulls).toBe(2);
  });
});

describe("directStreams with a bodiless sourced answer (GatewayHost.takesDirectSources)", () => {
  /** As the relay answers when the adapter takes sources: no body stream at all, only the source. */
  function bodiless(chunks: string[]): Response {
    const res = new Response(null, { status: 200, headers: { "content-type": "text/event-stream" } });
    let taken = false;
    attachDirectSource(res, () => {
      if (taken) return undefined;
      taken = true;
      return {
        pull: async (sink) => {
          const c = chunks.shift();
          if (c === undefined) sink.close();
          else sink.enqueue(enc.encode(c));
        },
        cancel: () => {},
      };
    });
    return res;
  }

  it("writes it from the source", async () => {
    const app = new Hono();
    app.get("/s", () => bodiless(["data: a\n\n", "data: b\n\n"]));
    expect(await (await fetch(`${await start(app)}/s`)).text()).toBe("data: a\n\ndata: b\n\n");
  });

  it("hands back a stream over the source when it cannot write to the socket itself", async () => {
    const res = await directStreams(() => bodiless(["data: x\n\n", "data: y\n\n"]))(new Request("http://x/s"), {});
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(await res.text()).toBe("data: x\n\ndata: y\n\n");
  });
});
