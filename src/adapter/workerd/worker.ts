/**
 * @module Serves the gateway on Cloudflare Workers (wrangler.toml: main = this file). Config comes from the
 * Worker's environment (KVGATE_* vars and secrets; KVGATE_CONFIG_JSON for a whole JSON config). The gateway is
 * built on the first request, because Workers forbid random values and timers at module scope; its state (index,
 * bookings) lives per isolate. Housekeeping runs on requests (no timers between them).
 */
import { bootFailure, bootGateway } from "../../gateway/boot.ts";
import type { Gateway } from "../../gateway/gateway.ts";
import { errorResponse } from "../../gateway/http-errors.ts";
import { KvgateError } from "../../core/errors.ts";

interface ExecutionContext {
  waitUntil(p: Promise<unknown>): void;
  passThroughOnException(): void;
}

let booting: Promise<Gateway> | undefined;

async function boot(env: Record<string, unknown>): Promise<Gateway> {
  const strings = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => typeof e[1] === "string"));
  const b = await bootGateway({ argv: [], env: strings, write: (t) => console.log(t.trimEnd()), runtime: "Cloudflare Workers" });
  if (b.kind !== "gateway") throw new KvgateError("KVGATE_ERR_STATE", "no gateway configured");
  return b.gateway;
}

export default {
  async fetch(req: Request, env: Record<string, unknown>, ctx: ExecutionContext): Promise<Response> {
    booting ??= boot(env);
    let gateway: Gateway;
    try {
      gateway = await booting;
    } catch (e) {
      booting = undefined;
      console.error(bootFailure(e).trimEnd());
      return errorResponse(e instanceof KvgateError ? e : new KvgateError("KVGATE_ERR_STATE", String((e as Error)?.message ?? e)));
    }
    return gateway.fetch(req, env, ctx);
  },
};
