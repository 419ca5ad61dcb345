/**
 * @module One place where an engine's reported usage lands: the hit-rate metrics, and the router's closed loop, which
 * sets the reported cached tokens against what was predicted for that worker when the request was routed.
 */
import type { RouteSignals } from "../routing/index.ts";
import type { HitScope } from "./gateway-metrics.ts";
import type { GatewayState } from "./gateway-state.ts";

/** Per routed decision, the blocks its rank's KV events had removed when it was routed (see markRouted). */
const removedAtRouting = new WeakMap<RouteSignals, number>();

/** Notes where the rank's evictions stood when `signals` was routed, so its usage can tell whether any came since. */
export function markRouted(gw: GatewayState, signals: RouteSignals): void {
  removedAtRouting.set(signals, gw.ingest.blocksRemovedOf(signals.worker, signals.dpRank));
}

export function recordUsage(gw: GatewayState, signals: RouteSignals, usage: unknown, scope?: HitScope & { sessionId?: string }): void {
  const r = gw.metrics.usage(usage, scope);
  // An engine that does not report cached tokens says nothing about the prediction (0 would read as a total miss).
  if (!r || r.cached === undefined || !(r.cached >= 0)) return;
  gw.router.reportUsage({
    worker: signals.worker, dpRank: signals.dpRank, predictedTokens: signals.cachedTokens, reportedTokens: r.cached, promptTokens: r.prompt,
    queuedPrefillTokens: signals.queuedPrefillTokens,
    completionTokens: r.completion !== undefined && r.completion >= 0 ? r.completion : undefined, sessionId: scope?.sessionId,
    evictedSince: gw.ingest.blocksRemovedOf(signals.worker, signals.dpRank) > (removedAtRouting.get(signals) ?? Infinity),
    decision: signals,
  });
}
