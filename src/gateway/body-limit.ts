/**
 * @module The request-body size limit, without forcing a body stream into existence. Hono's bodyLimit middleware
 * reads `req.body` to see whether there is one; on Node that alone turns @hono/node-server's lightweight request
 * into a full WHATWG Request with a web stream over the socket (~0.1 ms per request), and the handler's `text()`
 * then loses its fast path. A declared Content-Length is checked as a number instead (Node, Bun, Deno and workerd
 * all stop a body at its declared length); only bodies of unknown length are read here, with a running limit.
 */
import type { MiddlewareHandler } from "hono";
import { KvgateError } from "../core/errors.ts";
import { concat } from "./stream-events.ts";

export function bodyLimit(maxBytes: number): MiddlewareHandler {
  const tooLarge = (): KvgateError => new KvgateError("KVGATE_ERR_BODY_TOO_LARGE", `request body larger than ${maxBytes} bytes`);
  return async function limitBody(c, next) {
    const declared = c.req.header("content-length");
    if (declared !== undefined && c.req.header("transfer-encoding") === undefined) {
      if (!/^\d+$/.test(declared)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "invalid content-length");
      if (Number(declared) > maxBytes) throw tooLarge();
      return next();
    }
    const body = c.req.raw.body;
    if (!body) return next();
    const reader = body.getReader();
    const parts: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        await reader.cancel().catch(() => {});
        throw tooLarge();
      }
      parts.push(value);
    }
    c.req.raw = new Request(c.req.raw, { body: concat(parts) as Uint8Array<ArrayBuffer> });
    return next();
  };
}
