/**
 * @module POST /v1/route: the decision kvgate would take for a chat or completions body, and its signals, without
 * booking or dispatching anything. An external gateway can use it as an endpoint picker: the chosen worker's
 * host:port is also in `x-gateway-destination-endpoint`, the header Gateway API inference extensions read.
 */
import type { Context } from "hono";
import type { RouteSignals } from "../routing/index.ts";
import { servesDisaggregated } from "./disagg-decide.ts";
import { prepareExchange } from "./exchange.ts";
import type { GatewayState } from "./gateway-state.ts";
import { readJsonObjectText } from "../core/json-body.ts";

/** The response body of a preview (also returned for `kvgate.query_only` requests). */
export function previewBody(s: RouteSignals, tokenizeMs: number): Record<string, unknown> {
  return {
    object: "kvgate.route",
    request_id: s.requestId,
    worker: s.worker,
    dp_rank: s.dpRank,
    endpoint: s.endpoint,
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

export function routePreviewHandler(gw: GatewayState) {
  return async function routePreview(c: Context): Promise<Response> {
    const { value: raw, text } = await readJsonObjectText(c.req.raw);
    const ex = await prepareExchange(gw, c, Array.isArray(raw.messages) ? "chat" : "completions", raw, text);
    // A disaggregated model is previewed on its decode pool (where the client's stream would come from).
    const phase = servesDisaggregated(gw, ex.model) ? "decode" : undefined;
    const s = await gw.router.query({
      requestId: ex.requestId, tokens: ex.tokens, model: ex.model, phase, sessionId: ex.sessionId, exclude: ex.ext.exclude,
      overrides: ex.ext.overrides, target: ex.ext.target,
    });
    return c.json(previewBody(s, ex.tokenizeMs), 200, { "x-gateway-destination-endpoint": new URL(s.endpoint).host });
  };
}
