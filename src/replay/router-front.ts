/**
 * @module A minimal HTTP front for the routing engine, used by the replay bench until kvgate's gateway
 * (src/gateway/) is available to it: routes `/v1/completions` and `/v1/chat/completions` with the Router, forwards
 * the body unchanged to the chosen engine and streams the answer back, reporting the first token and the end of each
 * request to the router. Token-id prompts are routed on as given; text prompts use the simulated engines' tokenizer.
 * Fetch-handler only (Web standards), so any runtime can serve it.
 */
import { KvgateError, isKvgateError } from "../core/errors.ts";
import { SseSplitter } from "../gateway/sse-splitter.ts";
import type { RequestHandle, Router } from "../routing/index.ts";
import { simChatTokens, simCompletionTokens } from "../sim/sim-tokenizer.ts";
import type { ChatRequestBody, CompletionRequestBody } from "../tokenize/types.ts";

export interface RouterFrontOptions {
  router: Router;
  fetch?: typeof fetch;
}

export type FetchHandler = (req: Request) => Promise<Response>;

const PATHS = new Set(["/v1/completions", "/v1/chat/completions"]);

function errorResponse(e: unknown): Response {
  const err = isKvgateError(e) ? e : new KvgateError("KVGATE_ERR_STATE", (e as Error)?.message ?? String(e));
  return Response.json(err.toJSON(), { status: err.status });
}

function tokensOf(path: string, body: Record<string, unknown>): Uint32Array {
  const ids = body.prompt_token_ids ?? (Array.isArray(body.prompt) && typeof body.prompt[0] === "number" ? body.prompt : undefined);
  if (Array.isArray(ids)) return Uint32Array.from(ids as number[]);
  return path === "/v1/chat/completions"
    ? simChatTokens(body as unknown as ChatRequestBody)
    : simCompletionTokens(body as unknown as CompletionRequestBody);
}

/** True once an SSE event carrying generated text has passed (the role-only chat chunk does not count). */
function carriesToken(data: string | undefined): boolean {
  if (data === undefined || data === "[DONE]") return false;
  const c = (JSON.parse(data) as { choices?: { text?: string; delta?: { content?: string } }[] }).choices?.[0];
  return !!(c?.text || c?.delta?.content);
}

export function createRouterFront(o: RouterFrontOptions): FetchHandler {
  const doFetch = o.fetch ?? globalThis.fetch.bind(globalThis);
  return async (req) => {
    const path = new URL(req.url).pathname;
    if (req.method !== "POST" || !PATHS.has(path)) {
      return Response.json({ error: { message: `Not Found: ${req.method} ${path}`, type: "not_found_error", code: "not_found" } }, { status: 404 });
    }
    let handle: RequestHandle | undefined;
    try {
      const text = await req.text();
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(text) as Record<string, unknown>;
      } catch (e) {
        throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `malformed JSON body: ${(e as Error).message}`);
      }
      const requestId = req.headers.get("x-request-id") || crypto.randomUUID();
      const model = typeof body.model === "string" ? body.model : undefined;
      const out = await o.router.route({ requestId, tokens: tokensOf(path, body), model, signal: req.signal });
      if (out.kind === "queue_rejected") throw new KvgateError("KVGATE_ERR_QUEUE_REJECTED", "router queue rejected the request", { ...out.rejection });
      if (out.kind !== "routed") throw new KvgateError("KVGATE_ERR_STATE", `unexpected routing outcome ${out.kind}`);
      handle = out.handle;
      return await forward(doFetch, handle, path, text, requestId, req.signal);
    } catch (e) {
      handle?.fail();
      return errorResponse(e);
    }
  };
}

async function forward(doFetch: typeof fetch, handle: RequestHandle, path: string, text: string, requestId: string, signal: AbortSignal): Promise<Response> {
  let upstream: Response;
  try {
    upstream = await doFetch(`${handle.endpoint}${path}`, {
      method: "POST", headers: { "content-type": "application/json", "x-request-id": requestId }, body: text, signal,
    });
  } catch (e) {
    throw new KvgateError("KVGATE_ERR_STATE", `upstream ${handle.worker} failed: ${(e as Error).message}`);
  }
  const headers = new Headers({ "content-type": upstream.headers.get("content-type") ?? "application/json", "x-kvgate-worker": handle.worker });
  if (!upstream.ok || !upstream.body) {
    handle.fail();
    return new Response(await upstream.text(), { status: upstream.status, headers });
  }
  if (!headers.get("content-type")!.startsWith("text/event-stream")) {
    const whole = await upstream.text();
    handle.firstToken();
    handle.finish();
    return new Response(whole, { status: upstream.status, headers });
  }
  headers.set("cache-control", "no-cache");
  const reader = upstream.body.getReader();
  let splitter: SseSplitter | undefined = new SseSplitter();
  const stream = new ReadableStream<Uint8Array>({
    async pull(c) {
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch (e) {
        handle.fail();
        c.error(e);
        return;
      }
      if (r.done) {
        handle.finish();
        c.close();
        return;
      }
      // Only the first token matters to the router; after it the bytes pass through unparsed.
      if (splitter && splitter.push(r.value).some((ev) => carriesToken(ev.data))) {
        splitter = undefined;
        handle.firstToken();
      }
      c.enqueue(r.value);
    },
    cancel(reason) {
      handle.cancel();
      return reader.cancel(reason);
    },
  });
  return new Response(stream, { status: upstream.status, headers });
}
