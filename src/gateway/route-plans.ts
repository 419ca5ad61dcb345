/**
 * @module Two-phase routing over HTTP, for a proxy that uses kvgate as its endpoint picker and sends requests itself:
 * it reports on the plan `POST /v1/route` with `commit` opened, so kvgate's load accounting follows its requests.
 *
 *   POST /v1/route/{plan_id}/first_token   the first token arrived (idempotent); the plan's TTL starts again
 *   POST /v1/route/{plan_id}/keepalive     the request still runs (streams longer than the TTL); the TTL starts again
 *   POST /v1/route/{plan_id}/complete      the request ended; optional {"usage": <OpenAI usage>} feeds the hit metrics and the closed loop
 *   POST /v1/route/{plan_id}/cancel        the request was abandoned; optional {"failure": {kind, status?, retried?}} when
 *                                          the worker failed it (counted against the worker's health)
 */
import { Hono, type Context, type MiddlewareHandler } from "hono";
import { bearerToken } from "./bearer-token.ts";
import { KvgateError } from "../core/errors.ts";
import { parseJsonObject } from "../core/json-body.ts";
import type { PlanView } from "../routing/index.ts";
import { bodyLimit } from "./body-limit.ts";
import type { GatewayState } from "./gateway-state.ts";
import type { FailureKind } from "./upstream.ts";
import { recordUsage } from "./usage-feedback.ts";

/** A plan id is the proxy's capability for its booking: 128 random bits, so it cannot be guessed from another one. */
export function newPlanId(): string {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return `kvp-${Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("")}`;
}

/** Requires the route token when one is configured; a pass-through otherwise. */
export function routeTokenGuard(gw: GatewayState): MiddlewareHandler {
  const token = gw.config.routeToken;
  return token ? bearerToken(token) : async (_c, next) => next();
}

function bad(message: string, param?: string): never {
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message, param ? { param } : undefined);
}

/** A report's body: empty, or a JSON object. */
async function reportBody(c: Context): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  return text.trim() === "" ? {} : parseJsonObject(text);
}

function count(v: unknown, name: string): void {
  if (v !== undefined && v !== null && !(typeof v === "number" && Number.isInteger(v) && v >= 0)) bad(`${name} must be a non-negative integer`, name);
}

/** The usage a completion report may carry, checked as far as the hit metrics read it. */
function usageOf(body: Record<string, unknown>): Record<string, unknown> | undefined {
  const u = body.usage;
  if (u === undefined || u === null) return undefined;
  if (typeof u !== "object" || Array.isArray(u)) bad("usage must be an object", "usage");
  const usage = u as Record<string, unknown>;
  count(usage.prompt_tokens, "usage.prompt_tokens");
  const d = usage.prompt_tokens_details;
  if (d !== undefined && d !== null) {
    if (typeof d !== "object" || Array.isArray(d)) bad("usage.prompt_tokens_details must be an object", "usage.prompt_tokens_details");
    count((d as Record<string, unknown>).cached_tokens, "usage.prompt_tokens_details.cached_tokens");
  }
  return usage;
}

const FAILURE_KINDS: readonly FailureKind[] = ["connect", "timeout", "status", "stream", "idle", "truncated", "error_event"];

/** A cancel report's optional `failure`: {kind, status?, retried?}, why the proxy's attempt at the worker failed. */
function failureOf(body: Record<string, unknown>): { kind: FailureKind; status?: number; retried: boolean } | undefined {
  const f = body.failure;
  if (f === undefined || f === null) return undefined;
  if (typeof f !== "object" || Array.isArray(f)) bad("failure must be an object", "failure");
  const { kind, status, retried } = f as Record<string, unknown>;
  if (!FAILURE_KINDS.includes(kind as FailureKind)) bad(`failure.kind must be one of ${FAILURE_KINDS.join(", ")}`, "failure.kind");
  count(status, "failure.status");
  if (retried !== undefined && typeof retried !== "boolean") bad("failure.retried must be a boolean", "failure.retried");
  return { kind: kind as FailureKind, status: status as number | undefined, retried: retried === true };
}

export function planJson(p: PlanView, state: string = p.state): Record<string, unknown> {
  return { object: "kvgate.route_plan", plan_id: p.id, request_id: p.requestId, worker: p.worker, dp_rank: p.dpRank, state };
}

/** An open plan's answer also says how long it has left. */
function openPlanJson(gw: GatewayState, p: PlanView): Record<string, unknown> {
  return { ...planJson(p), expires_in_ms: Math.max(0, p.expiresAt - gw.now()) };
}

export function routePlanRoutes(gw: GatewayState): Hono {
  const plans = new Hono();
  plans.use("*", routeTokenGuard(gw), bodyLimit(gw.config.maxBodyBytes));

  plans.post("/:id/first_token", async (c) => {
    await reportBody(c);
    const p = gw.router.planFirstToken(c.req.param("id"));
    // As a worker's first output on kvgate's own path, it proves the worker serves (closes a half-open circuit).
    gw.health.attemptSucceeded(p.worker);
    return c.json(openPlanJson(gw, p));
  });

  plans.post("/:id/keepalive", async (c) => {
    await reportBody(c);
    return c.json(openPlanJson(gw, gw.router.planKeepAlive(c.req.param("id"))));
  });

  plans.post("/:id/complete", async (c) => {
    const usage = usageOf(await reportBody(c));
    // Read before the plan ends: closing it drops its signals.
    const signals = gw.planSignals.get(c.req.param("id"));
    const p = gw.router.planEnd(c.req.param("id"), "finished");
    gw.health.attemptSucceeded(p.worker);
    // As on kvgate's own path: the hit metrics, and the closed loop when the prediction is known.
    if (usage && signals) recordUsage(gw, signals, usage);
    else if (usage) gw.metrics.usage(usage);
    return c.json(planJson(p, "completed"));
  });

  plans.post("/:id/cancel", async (c) => {
    const failure = failureOf(await reportBody(c));
    const p = gw.router.planEnd(c.req.param("id"), "cancelled");
    if (failure) {
      // The worker failed the proxy's attempt: its health and circuit breaker must hear of it, or a dead worker
      // that caches the prompt would keep winning the decision.
      gw.metrics.upstreamFailures.inc({ kind: failure.kind });
      gw.health.attemptFailed(p.worker, failure.kind, failure.status);
      if (failure.retried) gw.metrics.retries.inc({ reason: failure.kind });
    }
    return c.json(planJson(p, "cancelled"));
  });

  return plans;
}
