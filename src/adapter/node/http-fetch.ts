/**
 * @module A `fetch` for talking to workers on Node, over node:http with kept-alive connections. Node's built-in
 * fetch (undici's WHATWG layer) costs about as much CPU per request as the simulated engine itself; on the same
 * machine this transport lets kvgate keep ~75% of a worker's direct throughput instead of ~30%. It covers what the
 * gateway sends (http/https, string or byte bodies, an AbortSignal) and returns a standard Response whose body
 * streams with backpressure; anything else (Request objects, stream bodies, redirects, other schemes) goes to the
 * global fetch so behaviour never narrows.
 */
import http from "node:http";
import https from "node:https";
import type { IncomingMessage } from "node:http";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import type { Readable } from "node:stream";
import { attachDirectBody } from "../../gateway/direct-source.ts";
import { LazyBodyResponse } from "./lazy-body-response.ts";

export interface NodeHttpFetchOptions {
  /** Open connections kept per worker; default 256. */
  maxSockets?: number;
  /** Idle kept-alive connections per worker; default 64. */
  maxFreeSockets?: number;
  /**
   * An idle kept-alive connection is closed after this long (ms); default 4,000 — under the 5 s idle limit of
   * uvicorn (vLLM, SGLang), so kvgate rarely writes into a connection the worker is closing.
   */
  idleSocketMs?: number;
  /** The fallback for what this transport does not cover; default the global fetch. */
  fallback?: typeof fetch;
}

const NULL_BODY = new Set([101, 103, 204, 205, 304]);
const REDIRECT = new Set([301, 302, 303, 307, 308]);
const STALE_SOCKET = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED"]);

export interface NodeHttpFetch {
  fetch: typeof fetch;
  /** Closes idle kept-alive connections (at shutdown). */
  close(): void;
}

export function createNodeHttpFetch(opts: NodeHttpFetchOptions = {}): NodeHttpFetch {
  const agentOpts = {
    keepAlive: true, maxSockets: opts.maxSockets ?? 256, maxFreeSockets: opts.maxFreeSockets ?? 64, scheduling: "lifo" as const,
    timeout: opts.idleSocketMs ?? 4_000,
  };
  const agents = { "http:": new http.Agent(agentOpts), "https:": new https.Agent(agentOpts) };
  const fallback = opts.fallback ?? globalThis.fetch.bind(globalThis);

  const fetchFn = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    if (input instanceof Request) return fallback(input, init);
    const url = typeof input === "string" ? new URL(input) : input;
    const body = init?.body;
    if ((url.protocol !== "http:" && url.protocol !== "https:") || !plainBody(body) || (init?.redirect !== undefined && init.redirect !== "follow")) {
      return fallback(input, init);
    }
    const signal = init?.signal ?? undefined;
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const headers: Record<string, string> = {};
    // The gateway hands over a Headers it built for this request: read it as is rather than copy it first.
    const given = init?.headers;
    (given instanceof Headers ? given : new Headers(given)).forEach((v, k) => {
      headers[k] = v;
    });
    const payload = body === undefined || body === null ? undefined : typeof body === "string" ? Buffer.from(body) : toBuffer(body);
    if (payload) headers["content-length"] = String(payload.byteLength);
    const method = (init?.method ?? "GET").toUpperCase();
    const mod = url.protocol === "https:" ? https : http;
    const agent = agents[url.protocol as "http:" | "https:"];
    const attempt = (retried: boolean): Promise<Response> => new Promise<Response>((resolve, reject) => {
      let settled = false;
      const req = mod.request(url, { method, headers, agent }, (res) => {
        const status = res.statusCode ?? 502;
        if (REDIRECT.has(status) && res.headers.location) {
          // Rare for a worker; the global fetch applies the redirect rules exactly.
          res.resume();
          settled = true;
          signal?.removeEventListener("abort", onAbort);
          resolve(fallback(input, init));
          return;
        }
        settled = true;
        resolve(toResponse(res, status, method, signal, () => signal?.removeEventListener("abort", onAbort)));
      });
      const onAbort = (): void => {
        req.destroy(abortReason(signal!) as Error);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      req.on("error", (e: NodeJS.ErrnoException) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener("abort", onAbort);
        if (signal?.aborted) return reject(abortReason(signal));
        // A kept-alive socket the worker closed while idle fails the next request before any byte of answer; that
        // says nothing about the worker, so the request goes once more on a fresh connection (as undici does).
        if (!retried && req.reusedSocket && STALE_SOCKET.has(e.code ?? "")) return resolve(attempt(true));
        reject(new TypeError("fetch failed", { cause: e }));
      });
      req.end(payload);
    });
    return attempt(false);
  };
  return {
    fetch: fetchFn as typeof fetch,
    close: () => {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}

function plainBody(body: RequestInit["body"]): boolean {
  return body === undefined || body === null || typeof body === "string" || body instanceof Uint8Array || body instanceof ArrayBuffer;
}

function toBuffer(body: RequestInit["body"]): Buffer {
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  const u8 = body as Uint8Array;
  return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

/** The worker's answer as a Response: headers as sent, the body decoded and streamed with backpressure. */
function toResponse(res: IncomingMessage, status: number, method: string, signal: AbortSignal | undefined, done: () => void): Response {
  const headers = new Headers();
  const raw = res.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  if (NULL_BODY.has(status) || method === "HEAD") {
    res.resume();
    res.once("end", done);
    return new Response(null, { status, statusText: res.statusMessage, headers });
  }
  const encoding = (res.headers["content-encoding"] ?? "").toLowerCase();
  const source: Readable = encoding === "gzip" || encoding === "x-gzip" ? res.pipe(createGunzip())
    : encoding === "deflate" ? res.pipe(createInflate())
    : encoding === "br" ? res.pipe(createBrotliDecompress())
    : res;
  if (source !== res) {
    // The body handed on is decoded, so its length and coding no longer describe it (as fetch does).
    headers.delete("content-encoding");
    headers.delete("content-length");
    res.once("error", (e) => source.destroy(e));
  }
  // The body is read one way, chosen by its first reader: the web stream, or the relay through attachDirectBody
  // (direct-source.ts), which takes chunks from the socket's stream with no web-stream enqueue and read per chunk.
  let mode: "none" | "stream" | "direct" = "none";
  let finished = false;
  let failure: unknown;
  let ended = false;
  let wake: (() => void) | undefined;
  const woken = (): void => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const finish = (): void => {
    if (finished) return;
    finished = true;
    done();
  };
  let ctl: ReadableStreamDefaultController<Uint8Array> | undefined;
  const fail = (e: unknown): void => {
    if (finished) return;
    finish();
    failure = signal?.aborted ? abortReason(signal) : new TypeError("terminated", { cause: e });
    ctl?.error(failure);
    woken();
  };
  // Listened to from the start whoever reads, so a failure before the first read is neither lost nor unhandled.
  source.once("error", fail);
  // A connection cut before the last byte ends the message without an error event on some Node versions.
  res.once("close", () => {
    if (!res.complete) fail(new Error("the connection closed before the response ended"));
  });
  source.once("end", () => {
    ended = true;
    if (mode === "stream" && !finished) {
      finish();
      ctl!.close();
    }
    woken();
  });
  const makeBody = (): ReadableStream<Uint8Array> => new ReadableStream<Uint8Array>({
    pull(c) {
      if (mode === "direct") return c.error(new TypeError("the body is read through its direct reader"));
      if (mode === "stream") return void source.resume();
      mode = "stream";
      ctl = c;
      if (failure !== undefined) return c.error(failure);
      if (ended) {
        finish();
        return c.close();
      }
      source.on("data", (chunk: Buffer) => {
        c.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        // Up to 8 chunks wait in the stream before the socket is paused.
        if ((c.desiredSize ?? 0) <= -8) source.pause();
      });
    },
    cancel() {
      finish();
      res.destroy();
    },
  }, { highWaterMark: 0 });
  const reader = {
    read(): Promise<ReadableStreamReadResult<Uint8Array>> {
      if (failure !== undefined) return Promise.reject(failure);
      const chunk = source.read() as Buffer | null;
      if (chunk !== null) return Promise.resolve({ done: false, value: new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength) });
      if (ended || finished) {
        finish();
        return Promise.resolve({ done: true, value: undefined });
      }
      // Woken by more data, the end or a failure; then read again.
      return new Promise<void>((resolve) => {
        wake = resolve;
      }).then(() => reader.read());
    },
    cancel(): Promise<void> {
      finish();
      res.destroy();
      // A read still waiting ends as done, as a cancelled stream's reads do.
      woken();
      return Promise.resolve();
    },
  };
  const response = new LazyBodyResponse(makeBody, { status, statusText: res.statusMessage, headers });
  attachDirectBody(response, () => {
    if (mode !== "none") return undefined;
    mode = "direct";
    source.on("readable", woken);
    return reader;
  });
  return response;
}
