/**
 * @module One HTTP attempt at a worker: header hygiene both ways, the client's abort and a headers timeout wired
 * into one AbortController, and failures sorted into kinds the retry logic understands.
 *
 * Hono's `proxy()` helper does the same header hygiene, but it forwards the client's body and headers as they
 * came; kvgate rewrites the body (routing field removed, usage requested), so the client's content-length and
 * stream cannot be reused and the request is built here.
 */
import { KvgateError } from "../core/errors.ts";
import { concat } from "./stream-events.ts";
import { openBody, type BodyReader } from "./direct-source.ts";

/** RFC 9110 §7.6.1 hop-by-hop fields, plus what a proxy must not pass on when it re-sends the body. */
const HOP_BY_HOP = ["connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"];
const REQUEST_DROP = new Set([...HOP_BY_HOP, "host", "content-length", "accept-encoding", "expect", "content-encoding"]);
const RESPONSE_DROP = new Set([...HOP_BY_HOP, "content-length", "content-encoding", "date", "server"]);
const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;

/** A copy of `src` without the `drop` fields; built by one pass over the fields kept rather than a copy and deletes. */
function strip(src: Headers, drop: ReadonlySet<string>): Headers {
  // Fields named in Connection are hop-by-hop too (RFC 9110 §7.6.1).
  const connection = src.get("connection");
  let named: Set<string> | undefined;
  if (connection) {
    named = new Set();
    for (const name of connection.split(",")) {
      const n = name.trim().toLowerCase();
      if (TOKEN.test(n)) named.add(n);
    }
  }
  const h = new Headers();
  // Iteration gives names lower-cased and each set-cookie on its own, so append keeps them as they were.
  src.forEach((v, k) => {
    if (!drop.has(k) && !named?.has(k)) h.append(k, v);
  });
  return h;
}

/**
 * Headers to send a worker: the client's, minus hop-by-hop fields and accept-encoding (the worker answers in
 * identity, so SSE is never compressed and buffered on the way).
 */
export function upstreamHeaders(client: Headers, requestId: string): Headers {
  const h = strip(client, REQUEST_DROP);
  h.set("content-type", "application/json");
  if (!h.has("x-request-id")) h.set("x-request-id", requestId);
  return h;
}

/** Headers to answer the client with: the worker's, minus hop-by-hop fields and the body framing we re-do. */
export function clientHeaders(upstream: Headers): Headers {
  return strip(upstream, RESPONSE_DROP);
}

/**
 * connect: no connection or it broke before headers; timeout: no headers in time; status: a retryable status;
 * stream: the body broke (read error); idle: the body went silent; truncated: it ended without [DONE];
 * error_event: the worker sent an error event mid-stream.
 */
export type FailureKind = "connect" | "timeout" | "status" | "stream" | "idle" | "truncated" | "error_event";

export class UpstreamFailure extends Error {
  constructor(readonly kind: FailureKind, message: string, readonly status?: number, readonly body?: string) {
    super(message);
    this.name = "UpstreamFailure";
  }

  /** The error the client gets when no further attempt is made. */
  toKvgateError(worker: string): KvgateError {
    const timeout = this.kind === "timeout" || this.kind === "idle";
    return new KvgateError(timeout ? "KVGATE_ERR_UPSTREAM_TIMEOUT" : "KVGATE_ERR_UPSTREAM", `worker ${worker}: ${this.message}`, { worker, status: this.status });
  }
}

/** Worker statuses worth another worker: the request was fine, this worker could not serve it now. */
export function retryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

export interface Attempt {
  res: Response;
  /** Aborts the attempt (upstream request and body); linked to the client's signal. */
  abort: AbortController;
}

/**
 * Stops an attempt: aborts its request and cancels the body reader. Never throws: workerd's internal streams
 * can throw synchronously from cancel() (a read pending on them), and a stop runs inside cleanup that must go on.
 */
export function stopAttempt(attempt: Attempt, reader: BodyReader | undefined): void {
  try {
    attempt.abort.abort();
  } catch {
    // The attempt is over either way.
  }
  try {
    if (reader) void reader.cancel().catch(() => {});
  } catch {
    // As above: the body is abandoned with its request.
  }
}

/**
 * POSTs `body` to `url`. Resolves once the worker's headers arrive with any status; rejects with an
 * UpstreamFailure on a network error or when no headers came within `timeoutMs`, or with the client's
 * cancellation (a KvgateError 499) when the client went away first.
 */
export async function sendUpstream(fetchFn: typeof fetch, url: string, headers: Headers, body: string, client: AbortSignal, timeoutMs: number): Promise<Attempt> {
  const abort = new AbortController();
  const onClientAbort = (): void => abort.abort(client.reason);
  if (client.aborted) throw new KvgateError("KVGATE_ERR_CANCELLED", "the client went away");
  client.addEventListener("abort", onClientAbort, { once: true });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort(new Error("timeout"));
  }, timeoutMs);
  try {
    const res = await fetchFn(url, { method: "POST", headers, body, signal: abort.signal });
    return { res, abort };
  } catch (e) {
    if (client.aborted) throw new KvgateError("KVGATE_ERR_CANCELLED", "the client went away");
    if (timedOut) throw new UpstreamFailure("timeout", `no response within ${timeoutMs} ms`);
    throw new UpstreamFailure("connect", `request failed: ${describe(e)}`);
  } finally {
    clearTimeout(timer);
  }
}

/** The innermost cause's message: fetch wraps ECONNREFUSED and friends in a generic TypeError. */
export function describe(e: unknown): string {
  let cur = e as { message?: string; cause?: unknown; code?: string } | undefined;
  const parts: string[] = [];
  for (let i = 0; cur && i < 4; i++, cur = cur.cause as typeof cur) {
    const m = cur.code ?? cur.message;
    if (m && !parts.includes(m)) parts.push(m);
  }
  return parts.join(": ") || String(e);
}

/**
 * Reads the next chunk, failing with an "idle" UpstreamFailure after `ms` of silence. Any other read error
 * becomes a "stream" failure (the worker died or reset the connection mid-body).
 */
export async function readChunk(reader: BodyReader, ms: number): Promise<ReadableStreamReadResult<Uint8Array>> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const idle = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new UpstreamFailure("idle", `no data for ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([reader.read(), idle]);
  } catch (e) {
    if (e instanceof UpstreamFailure) throw e;
    throw new UpstreamFailure("stream", `response body broke: ${describe(e)}`);
  } finally {
    clearTimeout(timer);
  }
}

/** The whole body as text, with the idle limit applied between chunks. */
export async function readAll(res: Response, idleMs: number): Promise<Uint8Array> {
  const reader = openBody(res);
  if (!reader) return new Uint8Array(0);
  const parts: Uint8Array[] = [];
  for (;;) {
    const r = await readChunk(reader, idleMs);
    if (r.done) break;
    parts.push(r.value);
  }
  return parts.length === 0 ? new Uint8Array(0) : concat(parts);
}
