/** @module Turns a selection into the signals the gateway reports (headers, metrics, preview bodies). */
import type { RouteSignals, RouteTimings } from "./routing-types.ts";
import type { Selection } from "./selector.ts";

export function routeSignals(requestId: string, sel: Selection, via: RouteSignals["via"], queueDepth: number, timings: RouteTimings): RouteSignals {
  const w = sel.rank.worker;
  return {
    requestId, worker: w.id, dpRank: sel.rank.dpRank, endpoint: w.endpoint,
    overlapBlocks: sel.overlapBlocks, bestOverlapBlocks: sel.bestOverlapBlocks, promptBlocks: sel.promptBlocks,
    requestTokens: sel.isl, cachedTokens: sel.cachedTokens, expectedCachedTokens: sel.expectedCachedTokens,
    // The reference's kv_hit_rate: cached share of the prompt's complete blocks, as predicted at routing time.
    predictedHitRate: sel.promptBlocks > 0 ? sel.overlapBlocks / sel.promptBlocks : 0,
    potentialPrefillTokens: sel.potentialPrefillTokens, queuedPrefillTokens: sel.queuedPrefillTokens, potentialDecodeBlocks: sel.potentialDecodeBlocks,
    totalKvBlocks: w.totalKvBlocks, cost: sel.cost, via, queueDepth, timings,
  };
}
