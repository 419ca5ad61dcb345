/**
 * @module From an HTTP request to an Exchange: the few body checks kvgate relies on, the model check, the routing
 * extension, the body workers get (routing field removed, usage requested for streams) and the prompt's tokens.
 */
import type { Context } from "hono";
import { KvgateError } from "../core/errors.ts";
import { parseRoutingExtension, sessionIdFrom, type RouteSignals } from "../routing/index.ts";
import type { Exchange, GatewayState } from "./gateway-state.ts";
import type { Endpoint } from "./prompt-tokens.ts";
import { requestScope } from "./request-scope.ts";
import { upstreamHeaders } from "./upstream.ts";
import { EXPLAIN_HEADER, wantsExplain } from "./explain.ts";
import { NO_TRACE, type RequestTrace } from "./request-trace.ts";

function bad(message: string, param: string): never {
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message, { param });
}

/** The fields kvgate itself relies on; everything else is the worker's to judge. */
export function checkBody(endpoint: Endpoint, body: Record<string, unknown>): void {
  if (body.model !== undefined && body.model !== null && typeof body.model !== "string") bad("model must be a string", "model");
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== "boolean") bad("stream must be a boolean", "stream");
  const so = body.stream_options;
  if (so !== undefined && so !== null && (typeof so !== "object" || Array.isArray(so))) bad("stream_options must be an object", "stream_options");
  if (endpoint === "chat") {
    if (!Array.isArray(body.messages) || body.messages.length === 0) bad("messages must be a non-empty array", "messages");
    if (body.messages.some((m) => m === null || typeof m !== "object" || typeof (m as { role?: unknown }).role !== "string")) bad("every message needs a role", "messages");
  } else if (body.prompt === undefined || body.prompt === null) {
    bad("prompt is required", "prompt");
  }
}

/**
 * The body the worker gets, as text: the client's own text when kvgate changes nothing, or only asks for usage
 * (spliced in front; the body has no stream_options then), so a 4–400 KB prompt is not serialized again on the
 * request path and integers beyond 2^53 reach the worker exactly as sent. Re-serialized when kvgate's routing
 * field has to come out or stream_options is merged.
 */
export function workerBodyText(raw: Record<string, unknown>, body: Record<string, unknown>, text: string | undefined, usageAdded: boolean): string {
  if (text === undefined || "kvgate" in raw || (usageAdded && "stream_options" in raw)) return JSON.stringify(body);
  if (!usageAdded) return text;
  const at = text.indexOf("{") + 1;
  return `${text.slice(0, at)}"stream_options":{"include_usage":true},${text.slice(at)}`;
}

/**
 * What a worker is sent for a client's body (also the Workers pool path's, which sends it from the Worker).
 * `headerSalt`: the tenant header's namespace, added as `cache_salt` so the engine isolates the tenant too.
 */
export function workerBody(raw: Record<string, unknown>, rawText: string | undefined, streamUsage: boolean, headerSalt?: string): {
  body: Record<string, unknown>; bodyText: string; stream: boolean; stripUsage: boolean;
} {
  const body: Record<string, unknown> = { ...raw };
  delete body.kvgate;
  if (headerSalt !== undefined) body.cache_salt = headerSalt;
  const stream = raw.stream === true;
  let stripUsage = false;
  const so = raw.stream_options as Record<string, unknown> | null | undefined;
  if (stream && streamUsage && so?.include_usage !== true) {
    body.stream_options = { ...(so ?? {}), include_usage: true };
    stripUsage = true;
  }
  return { body, bodyText: workerBodyText(raw, body, headerSalt === undefined ? rawText : undefined, stripUsage), stream, stripUsage };
}

/**
 * Parses, tokenizes and describes one request; shared with /v1/route. `rawText` is the text `raw` was parsed
 * from, when the caller has it.
 */
export async function prepareExchange(gw: GatewayState, c: Context, endpoint: Endpoint, raw: Record<string, unknown>, rawText?: string, trace: RequestTrace = NO_TRACE): Promise<Exchange> {
  const arrivedAt = gw.fineNow();
  const explain = wantsExplain(c.req.raw.headers, gw.config.adminToken);
  checkBody(endpoint, raw);
  const scope = requestScope(gw, raw, c.req.raw.headers);
  const model = scope.model;
  const ext = parseRoutingExtension(raw);
  const { body, bodyText, stream, stripUsage } = workerBody(raw, rawText, gw.config.upstream.streamUsage,
    scope.saltFromHeader ? scope.namespace : undefined);
  const tokenizeStart = trace.now();
  const t = await gw.tokenizers.tokenize(endpoint, body, scope.tokenizerModel);
  trace.tokenized(tokenizeStart, t.tokens.length, t.mode);
  gw.metrics.tokenized.inc({ mode: t.mode });
  const requestId = gw.newRequestId();
  const headers = upstreamHeaders(c.req.raw.headers, requestId);
  // The explain request (and the admin token with it) is kvgate's, not the worker's.
  if (explain) {
    headers.delete(EXPLAIN_HEADER);
    if (gw.config.adminToken !== "") headers.delete("authorization");
  }
  return {
    endpoint, path: endpoint === "chat" ? "/v1/chat/completions" : "/v1/completions", model, adapter: scope.adapter,
    namespace: scope.namespace, tokenizerModel: scope.tokenizerModel, body, bodyText,
    tokens: t.tokens.subarray(0, gw.config.index.maxPromptTokens), tokenizeMs: t.ms, stream, stripUsage, requestId,
    headers, ext, sessionId: sessionIdFrom(c.req.raw.headers, gw.config.router.sessionHeader), maxTokens: maxTokensOf(raw),
    signal: c.req.raw.signal, arrivedAt, explain, trace, excluded: [], retriesLeft: gw.config.upstream.retries, migrationsLeft: gw.config.upstream.migrationLimit,
  };
}

/** max_completion_tokens (chat) or max_tokens, when the client gave a positive integer; else undefined. */
function maxTokensOf(raw: Record<string, unknown>): number | undefined {
  const v = raw.max_completion_tokens ?? raw.max_tokens;
  return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : undefined;
}

/** Response headers that explain the decision (which worker, how much of the prompt it was predicted to hold). */
export function decisionHeaders(s: RouteSignals, requestId: string): Record<string, string> {
  return {
    "x-kvgate-request-id": requestId, "x-kvgate-worker": s.worker, "x-kvgate-dp-rank": String(s.dpRank),
    "x-kvgate-overlap-blocks": `${s.overlapBlocks}/${s.promptBlocks}`,
    "x-kvgate-expected-cached-tokens": String(s.expectedCachedTokens),
  };
}
