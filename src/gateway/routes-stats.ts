/**
 * @module GET /v1/stats (the JSON the dashboard polls) and GET /dashboard (the page). The stats are behind the admin
 * token when one is set (401 error JSON without it); the page itself carries no data, so it loads without the token
 * and asks for it (or takes `?token=`) before polling.
 *
 *   GET /v1/stats?since=T   series from interval start T on (the gateway clock, ms), for incremental polling
 */
import { Hono, type MiddlewareHandler } from "hono";
import { bearerToken } from "./bearer-token.ts";
import { KvgateError } from "../core/errors.ts";
import { dashboardResponse } from "../dashboard/dashboard-page.ts";
import type { GatewayState } from "./gateway-state.ts";
import { buildStats } from "./stats-snapshot.ts";

const open: MiddlewareHandler = async (_c, next) => {
  await next();
};

function parseSince(v: string | undefined): number | undefined {
  if (v === undefined || v === "") return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "since must be a number (an interval start from an earlier /v1/stats)", { param: "since" });
  return n;
}

export function statsRoutes(gw: GatewayState): Hono {
  const app = new Hono();
  const token = gw.config.adminToken;
  const auth = token ? bearerToken(token) : open;
  app.get("/v1/stats", auth, (c) => {
    const since = parseSince(c.req.query("since"));
    return c.json(buildStats(gw, { since }), 200, { "cache-control": "no-store" });
  });
  app.get("/dashboard", (c) => dashboardResponse(c.req.header("if-none-match")));
  return app;
}
