/**
 * @module Serves one completion request on the simulated engine, streamed (SSE) or whole. A client that goes away
 * (request signal aborted, or the response stream cancelled) aborts the engine request, which frees its KV blocks.
 */
import { KvgateError } from "../core/errors.ts";
import type { SimEngine, SimHandle, SimResult } from "./sim-engine.ts";
import type { ParsedRequest } from "./openai-request.ts";
import { fullResponse, roleChunk, SSE_DONE, sseData, textChunk, usage, usageChunk, type ResponseMeta, type Usage } from "./openai-response.ts";
import { simDecode } from "./sim-tokenizer.ts";
import { unixSeconds } from "./sim-clock.ts";

export interface GenerateInput {
  engine: SimEngine;
  req: ParsedRequest;
  /** Engine request id (from `x-request-id` when the client sent one). */
  requestId?: string;
  signal: AbortSignal;
  /** Disaggregated serving (disagg-sim.ts): KV transferred in, and what to do when the request ends. */
  transfer?: TransferHooks;
}

export interface TransferHooks {
  /** Leading prompt tokens whose KV arrived from a remote prefill (they count as cached). */
  externalTokens?: number;
  /** Called synchronously when the engine ends the request; fields returned are added to a whole response. */
  onFinish?(result: SimResult, prompt: Uint32Array): Record<string, unknown> | undefined;
  /** The engine refused the request before running it. */
  onRefused?(error: unknown): void;
}

function metaFor(engine: SimEngine, req: ParsedRequest, id: string): ResponseMeta {
  return { kind: req.kind, id: `${req.kind === "chat" ? "chatcmpl" : "cmpl"}-${id}`, created: Math.floor(unixSeconds(engine.clock)), model: req.model ?? engine.options.model };
}

export async function generate({ engine, req, requestId, signal, transfer = {} }: GenerateInput): Promise<Response> {
  const maxTokens = req.maxTokens ?? engine.options.defaultMaxTokens;
  try {
    engine.validate(req.prompt.length, maxTokens);
    if (signal.aborted) throw new KvgateError("KVGATE_ERR_CANCELLED", "the client went away");
    return req.stream ? stream(engine, req, maxTokens, requestId, signal, transfer) : await whole(engine, req, maxTokens, requestId, signal, transfer);
  } catch (e) {
    transfer.onRefused?.(e);
    throw e;
  }
}

async function whole(engine: SimEngine, req: ParsedRequest, maxTokens: number, requestId: string | undefined, signal: AbortSignal, transfer: TransferHooks): Promise<Response> {
  let extra: Record<string, unknown> | undefined;
  const handle = engine.submit({ id: requestId, prompt: req.prompt, maxTokens, externalTokens: transfer.externalTokens, lora: req.lora, cacheSalt: req.cacheSalt }, {
    onFinish: (r) => void (extra = transfer.onFinish?.(r, req.prompt)),
  });
  const onAbort = (): void => handle.abort();
  signal.addEventListener("abort", onAbort, { once: true });
  const result = await handle.result;
  signal.removeEventListener("abort", onAbort);
  if (result.reason === "abort") {
    throw new KvgateError(signal.aborted ? "KVGATE_ERR_CANCELLED" : "KVGATE_ERR_CAPACITY", signal.aborted ? "the client went away" : "the engine stopped before the request finished");
  }
  const meta = metaFor(engine, req, handle.id);
  const u = usage(result.promptTokens, result.completionTokens, result.cachedTokens);
  return Response.json({ ...fullResponse(meta, simDecode(result.tokens), "length", u), ...extra });
}

function stream(engine: SimEngine, req: ParsedRequest, maxTokens: number, requestId: string | undefined, signal: AbortSignal, transfer: TransferHooks): Response {
  let handle: SimHandle | undefined;
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let open = true;
  // `start` runs synchronously inside the constructor, so the controller exists before the request is submitted;
  // submitting outside the stream lets a refused request still become an error response rather than a broken stream.
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    cancel() {
      open = false;
      handle?.abort();
    },
  });
  const send = (bytes: Uint8Array): void => {
    if (open) controller.enqueue(bytes);
  };
  const end = (): void => {
    if (!open) return;
    open = false;
    controller.close();
  };
  let cached = 0;
  const running = (completion: number): Usage | undefined => (req.continuousUsage ? usage(req.prompt.length, completion, cached) : undefined);
  let meta!: ResponseMeta;
  handle = engine.submit({ id: requestId, prompt: req.prompt, maxTokens, externalTokens: transfer.externalTokens, lora: req.lora, cacheSalt: req.cacheSalt }, {
    onToken(token, index) {
      if (index === 0) cached = handle!.cachedTokens;
      send(sseData(textChunk(meta, simDecode([token]), index === maxTokens - 1 ? "length" : null, running(index + 1))));
    },
    onFinish(result) {
      transfer.onFinish?.(result, req.prompt);
      if (result.reason === "length") {
        if (req.includeUsage) send(sseData(usageChunk(meta, usage(result.promptTokens, result.completionTokens, result.cachedTokens))));
        send(SSE_DONE);
      }
      end();
    },
  });
  meta = metaFor(engine, req, handle.id);
  if (req.kind === "chat") send(sseData(roleChunk(meta, running(0))));
  signal.addEventListener("abort", () => {
    open = false;
    handle?.abort();
  }, { once: true });
  return new Response(body, { headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" } });
}
