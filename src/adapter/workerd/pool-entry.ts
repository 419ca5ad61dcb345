/**
 * @module The Worker entry when the KVGATE_POOL Durable Object binding is configured: completions are decided by
 * the pool object and streamed here (pool-dispatch.ts); every other request (KV events, admin, models, health,
 * readiness, metrics, /v1/route and its reports) is the object's and is forwarded to it as it came.
 *
 * One pool per Worker deployment (`idFromName("default")`): KV events and admin calls name a worker, not a model,
 * so several pools behind one Worker would need a worker-to-pool map kept consistent with the fleet; deploy one
 * Worker (and so one object) per pool instead.
 */
import { KvgateError } from "../../core/errors.ts";
import { loadGatewayConfig } from "../../gateway/config-load.ts";
import type { GatewayConfig } from "../../gateway/config.ts";
import { toErrorResponse } from "../../gateway/http-errors.ts";
import { envStrings, type ExecutionContext } from "./env-boot.ts";
import { PoolClient, type PoolNamespace } from "./pool-client.ts";
import { poolCompletion, STATE_HEADER } from "./pool-dispatch.ts";
import { PoolLeases } from "./pool-leases.ts";
import { DEFAULT_STREAM_LEASE_MS } from "../../gateway/stream-leases.ts";

export const POOL_BINDING = "KVGATE_POOL";
const POOL_NAME = "default";

let setup: Promise<GatewayConfig> | undefined;
/** This isolate's streams (Workers drop gone clients silently: leases are on unless --stream-lease-ms 0). */
let leases: PoolLeases | undefined;

async function load(env: Record<string, unknown>): Promise<GatewayConfig> {
  const loaded = await loadGatewayConfig({ argv: [], env: envStrings(env) });
  if (loaded.kind !== "config") throw new KvgateError("KVGATE_ERR_STATE", "no gateway configured");
  return loaded.config;
}

function withState(res: Response): Response {
  const out = new Response(res.body, res);
  out.headers.set("x-kvgate-state", STATE_HEADER["x-kvgate-state"]);
  return out;
}

export async function poolFetch(req: Request, env: Record<string, unknown>, ctx: ExecutionContext, ns: PoolNamespace): Promise<Response> {
  try {
    setup ??= load(env);
    const cfg = await setup.catch((e) => {
      setup = undefined;
      throw e;
    });
    // A stub is an I/O object of the request that made it: one per request.
    const pool = new PoolClient(ns.get(ns.idFromName(POOL_NAME)), cfg.routeToken);
    leases ??= new PoolLeases(cfg.upstream.streamLeaseMs ?? DEFAULT_STREAM_LEASE_MS, cfg.upstream.idleTimeoutMs);
    leases.sweep(pool, ctx);
    const path = new URL(req.url).pathname;
    if (req.method === "POST" && (path === "/v1/chat/completions" || path === "/v1/completions")) {
      return await poolCompletion(req, path === "/v1/chat/completions" ? "chat" : "completions", pool, cfg, ctx, leases);
    }
    return withState(await pool.forward(req));
  } catch (e) {
    return withState(toErrorResponse(e, (m) => console.error(`kvgate warn: ${m}`)));
  }
}
