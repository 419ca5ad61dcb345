/**
 * @module The bearer-token check of the admin, stats and route-plan APIs: hono/bearer-auth comparing the token in
 * constant time as it is. By default it first hashes both strings with crypto.subtle.digest, an asynchronous job per
 * request (~180 µs per request through a Hono app on Node 20), paid by every KV-event batch pushed over HTTP and every two-phase
 * plan call; the comparison is constant-time without it (hono runs it over the longer string whatever the contents).
 */
import type { MiddlewareHandler } from "hono";
import { bearerAuth } from "hono/bearer-auth";

export function bearerToken(token: string): MiddlewareHandler {
  return bearerAuth({ token, hashFunction: (s: string) => s });
}
