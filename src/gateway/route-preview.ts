/**
 * @module POST /v1/route: the decision kvgate would take for a chat or completions body, and its signals, without
 * booking or dispatching anything. An external gateway can use it as an endpoint picker: the chosen worker's
 * host:port is also in `x-gateway-destination-endpoint`, the header Gateway API inference extensions read. With
 * `"commit": true` the decision is booked as kvgate's own dispatch would book it and named by a plan id, on which
 * the proxy then reports (route-plans.ts).
 */
import type { Context } from "hono";
import { KvgateError } from "../core/errors.ts";
import { queueRejectedError, type RouteSignals } from "../routing/index.ts";
import { servesDisaggregated } from "./disagg-decide.ts";
import { prepareExchange } from "./exchange.ts";
import type { Exchange, GatewayState } from "./gateway-state.ts";
import { readJsonObjectText } from "../core/json-body.ts";
import { newPlanId, routeTokenGuard } from "./route-plans.ts";
import { explainTable } from "./explain.ts";
import { markRouted } from "./usage-feedback.ts";

/** The response body of a preview (also returned for `kvgate.query_only` requests). */
export function previewBody(s: RouteSignals, ex: Pick<Exchange, "tokenizeMs" | "model" | "adapter" | "namespace">): Record<string, unknown> {
  const tokenizeMs = ex.tokenizeMs;
  return {
    object: "kvgate.route",
    request_id: s.requestId,
    worker: s.worker,
    dp_rank: s.dpRank,
    endpoint: s.endpoint,
    model: ex.model ?? null,
    adapter: ex.adapter ?? null,
    namespace: ex.namespace ?? null,
    overlap_blocks: s.overlapBlocks,
    best_overlap_blocks: s.bestOverlapBlocks,
    prompt_blocks: s.promptBlocks,
    prompt_tokens: s.requestTokens,
    cached_tokens: s.cachedTokens,
    predicted_hit_rate: s.predictedHitRate,
    potential_prefill_tokens: s.potentialPrefillTokens,
    potential_decode_blocks: s.potentialDecodeBlocks,
    total_kv_blocks: s.totalKvBlocks ?? null,
    cost: s.cost,
    via: s.via,
    queue_depth: s.queueDepth,
    timings_ms: { tokenize: tokenizeMs, hash_match: s.timings.hashMatchMs, schedule: s.timings.scheduleMs },
  };
}

function commitOf(raw: Record<string, unknown>): boolean {
  const v = raw.commit;
  if (v === undefined || v === null) return false;
  if (typeof v !== "boolean") throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "commit must be a boolean", { param: "commit" });
  return v;
}

/** Books the decision under a new plan id; the answer adds plan_id and expires_in_ms to the preview fields. */
async function commit(gw: GatewayState, ex: Exchange): Promise<{ body: Record<string, unknown>; signals: RouteSignals }> {
  if (ex.ext.queryOnly) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "commit and kvgate.query_only exclude each other", { param: "commit" });
  if (servesDisaggregated(gw, ex.model)) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `model ${ex.model} is served disaggregated (prefill and decode workers); commit books one worker and cannot plan both legs`, { param: "commit" });
  }
  const out = await gw.router.commit({
    requestId: ex.requestId, tokens: ex.tokens, model: ex.model, lora: ex.adapter, namespace: ex.namespace, sessionId: ex.sessionId, signal: ex.signal, exclude: ex.ext.exclude,
    overrides: ex.ext.overrides, priority: ex.ext.priority, target: ex.ext.target, explain: ex.explain || undefined, maxTokens: ex.maxTokens,
  }, newPlanId());
  if (out.kind === "queue_rejected") throw queueRejectedError(out.rejection);
  // One prediction per booked request, as kvgate's own dispatch records it.
  gw.metrics.routed(out.signals, ex.tokenizeMs, ex);
  const plan = out.plan;
  // The usage the proxy reports on completion is set against this prediction (the closed loop).
  gw.planSignals.set(plan.id, out.signals);
  markRouted(gw, out.signals);
  const body: Record<string, unknown> = { ...previewBody(out.signals, ex), plan_id: plan.id, expires_in_ms: Math.max(0, plan.expiresAt - gw.now()) };
  if (ex.explain && out.decision) body.explain = explainTable(out.decision);
  return { body, signals: out.signals };
}

export function routePreviewHandler(gw: GatewayState) {
  const guard = routeTokenGuard(gw);
  return async function routePreview(c: Context): Promise<Response> {
    const { value: raw, text } = await readJsonObjectText(c.req.raw);
    if (commitOf(raw)) {
      // The token (when configured) guards what changes kvgate's accounting, not the read-only preview.
      await guard(c, async () => {});
      const ex = await prepareExchange(gw, c, Array.isArray(raw.messages) ? "chat" : "completions", raw, text);
      const { body, signals } = await commit(gw, ex);
      return c.json(body, 200, { "x-gateway-destination-endpoint": new URL(signals.endpoint).host });
    }
    const ex = await prepareExchange(gw, c, Array.isArray(raw.messages) ? "chat" : "completions", raw, text);
    // A disaggregated model is previewed on its decode pool (where the client's stream would come from).
    const phase = servesDisaggregated(gw, ex.model) ? "decode" : undefined;
    const { signals: s, decision } = await gw.router.queryDecision({
      requestId: ex.requestId, tokens: ex.tokens, model: ex.model, lora: ex.adapter, namespace: ex.namespace, phase, sessionId: ex.sessionId, exclude: ex.ext.exclude,
      overrides: ex.ext.overrides, target: ex.ext.target, explain: ex.explain || undefined,
    });
    const body = decision ? { ...previewBody(s, ex), explain: explainTable(decision) } : previewBody(s, ex);
    return c.json(body, 200, { "x-gateway-destination-endpoint": new URL(s.endpoint).host });
  };
}
