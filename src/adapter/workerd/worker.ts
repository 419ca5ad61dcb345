/**
 * @module Serves the gateway on Cloudflare Workers (wrangler.toml: main = this file). Config comes from the
 * Worker's environment (KVGATE_* vars and secrets; KVGATE_CONFIG_JSON for a whole JSON config). With the
 * KVGATE_POOL Durable Object binding the routing state is the pool object's (pool-entry.ts); without it each
 * isolate has its own gateway (index, bookings), with housekeeping on requests (no timers between them).
 */
import { LazyGateway, type ExecutionContext } from "./env-boot.ts";
import type { PoolNamespace } from "./pool-client.ts";
import { POOL_BINDING, poolFetch } from "./pool-entry.ts";

export { PoolState } from "./pool-state.ts";

const gateway = new LazyGateway();

export default {
  async fetch(req: Request, env: Record<string, unknown>, ctx: ExecutionContext): Promise<Response> {
    const pool = env[POOL_BINDING] as PoolNamespace | undefined;
    if (pool) return poolFetch(req, env, ctx, pool);
    const g = await gateway.get(env);
    return g instanceof Response ? g : g.fetch(req, env, ctx);
  },
};
