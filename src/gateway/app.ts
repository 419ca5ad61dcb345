/**
 * @module createApp: the gateway's Hono app over a GatewayState — routes, body limits, error handling and
 * housekeeping on demand. Web standards only, so the same app serves Node, Bun, Deno and Workers.
 */
import { Hono, type Context } from "hono";
import { bodyLimit } from "./body-limit.ts";
import { completionHandler } from "./completion-handler.ts";
import type { GatewayState } from "./gateway-state.ts";
import type { PromptTokenizer } from "../tokenize/types.ts";
import { notFoundResponse, toErrorResponse } from "./http-errors.ts";
import { routePlanRoutes } from "./route-plans.ts";
import { routePreviewHandler } from "./route-preview.ts";
import { adminRoutes } from "./routes-admin.ts";
import { statsRoutes } from "./routes-stats.ts";

export interface AppHooks {
  /** Runs housekeeping when it is due; a returned promise is background work (health probes). */
  maybeTick(): Promise<void> | undefined;
}

/** Workers end a request's background work with the response unless it is handed to waitUntil. */
function keepAlive(c: Context, p: Promise<void>): void {
  let ctx: { waitUntil(p: Promise<unknown>): void } | undefined;
  try {
    ctx = c.executionCtx;
  } catch {
    // Not on Workers: the promise runs on by itself.
  }
  ctx?.waitUntil(p.catch(() => {}));
}

/** Workers freeze timers between requests: queued spans are sent under waitUntil instead of on the exporter's timer. */
function flushSpansOnWorkers(c: Context, gw: GatewayState): void {
  if (!gw.tracing.exporter?.pending) return;
  try {
    c.executionCtx.waitUntil(gw.tracing.flush());
  } catch {
    // Not on Workers: the exporter's own timer sends them.
  }
}

export function createApp(gw: GatewayState, hooks: AppHooks): Hono {
  const app = new Hono();
  app.onError((err) => toErrorResponse(err, (m) => gw.log("warn", m)));
  app.notFound((c) => notFoundResponse(c.req.method, c.req.url));

  // One middleware for both jobs: every async layer costs a few microseconds per request.
  app.use("*", async function housekeeping(c, next) {
    const p = hooks.maybeTick();
    if (p) keepAlive(c, p);
    await next();
    if (c.req.path.startsWith("/v1/")) gw.metrics.answered(c.req.routePath, c.res.status);
    flushSpansOnWorkers(c, gw);
  });

  app.get("/health", (c) => c.json({ status: "ok" }));
  app.get("/ready", (c) => {
    const ranks = gw.router.snapshot().ranks;
    const healthy = new Set(ranks.filter((r) => r.health === "healthy").map((r) => r.worker)).size;
    const ready = healthy > 0;
    return c.json({ status: ready ? "ready" : "not_ready", workers: gw.fleet.size, healthy_workers: healthy }, ready ? 200 : 503);
  });
  app.get("/metrics", () => new Response(gw.metrics.render(gw.router.snapshot(), gw.index, gw.ingest.hub.counters(), gw.ingest.zmqCounters(), loadedTokenizers(gw)), { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } }));
  app.get("/v1/models", (c) => c.json({ object: "list", data: gw.fleet.models() }));

  const limit = bodyLimit(gw.config.maxBodyBytes);
  app.post("/v1/chat/completions", limit, completionHandler(gw, "chat"));
  app.post("/v1/completions", limit, completionHandler(gw, "completions"));
  app.post("/v1/route", limit, routePreviewHandler(gw));
  app.route("/v1/route", routePlanRoutes(gw));
  app.route("/admin", adminRoutes(gw));
  app.route("/", statsRoutes(gw));
  return app;
}

/** The precise tokenizers in memory now (none are loaded by a scrape). */
function loadedTokenizers(gw: GatewayState): PromptTokenizer[] {
  const out: PromptTokenizer[] = [];
  for (const m of gw.registry.loadedModels()) {
    const t = gw.registry.peek(m);
    if (t) out.push(t);
  }
  return out;
}
