/**
 * @module One place where an engine's reported usage lands: the hit-rate metrics, and the router's closed loop, which
 * sets the reported cached tokens against what was predicted for that worker when the request was routed.
 */
import type { RouteSignals } from "../routing/index.ts";
import type { HitScope } from "./gateway-metrics.ts";
import type { GatewayState } from "./gateway-state.ts";

export function recordUsage(gw: GatewayState, signals: RouteSignals, usage: unknown, scope?: HitScope & { sessionId?: string }): void {
  const r = gw.metrics.usage(usage, scope);
  // An engine that does not report cached tokens says nothing about the prediction (0 would read as a total miss).
  if (!r || r.cached === undefined || !(r.cached >= 0)) return;
  gw.router.reportUsage({
    worker: signals.worker, dpRank: signals.dpRank, predictedTokens: signals.cachedTokens, reportedTokens: r.cached, promptTokens: r.prompt,
    completionTokens: r.completion !== undefined && r.completion >= 0 ? r.completion : undefined, sessionId: scope?.sessionId,
  });
}
