/**
 * @module Every error kvgate answers is OpenAI error JSON (`{"error": {message, type, code}}`) with the right
 * status: typed KvgateErrors carry theirs, Hono's HTTPExceptions (body limit, bearer auth) are translated, and
 * anything unexpected is a 500 that is logged — no client input can end the process.
 */
import { HTTPException } from "hono/http-exception";
import { KvgateError, isKvgateError, type ErrorCode } from "../core/errors.ts";

export function errorResponse(e: KvgateError): Response {
  const headers: Record<string, string> = {};
  const retryMs = e.detail?.retryAfterMs;
  // Retry-After is whole seconds (RFC 9110 §10.2.3); never 0, which clients read as "now, in a loop".
  if (e.status === 429 && typeof retryMs === "number") headers["retry-after"] = String(Math.max(1, Math.ceil(retryMs / 1000)));
  if (e.status === 401) headers["www-authenticate"] = 'Bearer realm="kvgate"';
  return Response.json(e.toJSON(), { status: e.status, headers });
}

const HTTP_CODES: Record<number, ErrorCode> = {
  400: "KVGATE_ERR_BAD_ARGUMENT", 401: "KVGATE_ERR_UNAUTHORIZED", 403: "KVGATE_ERR_FORBIDDEN", 404: "KVGATE_ERR_NOT_FOUND",
  413: "KVGATE_ERR_BODY_TOO_LARGE", 504: "KVGATE_ERR_UPSTREAM_TIMEOUT",
};

/** Hono's onError: the error as an OpenAI error response. */
export function toErrorResponse(err: unknown, log: (m: string) => void): Response {
  if (isKvgateError(err)) return errorResponse(err);
  if (err instanceof HTTPException) {
    const code = HTTP_CODES[err.status];
    if (code) {
      const message = err.status === 413 ? "request body too large" : err.status === 401 ? "missing or invalid bearer token" : err.message || `HTTP ${err.status}`;
      return errorResponse(new KvgateError(code, message));
    }
    return err.getResponse();
  }
  log(`internal error: ${(err as Error)?.stack ?? String(err)}`);
  return errorResponse(new KvgateError("KVGATE_ERR_STATE", `internal error: ${(err as Error)?.message ?? String(err)}`));
}

export function notFoundResponse(method: string, url: string): Response {
  return errorResponse(new KvgateError("KVGATE_ERR_NOT_FOUND", `no route for ${method} ${new URL(url).pathname}`));
}
