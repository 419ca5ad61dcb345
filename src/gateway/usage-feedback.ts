/**
 * @module One place where an engine's reported usage lands: the hit-rate metrics, and the router's closed loop, which
 * sets the reported cached tokens against what was predicted for that worker when the request was routed.
 */
import type { RouteSignals } from "../routing/index.ts";
import type { HitScope } from "./gateway-metrics.ts";
import type { GatewayState } from "./gateway-state.ts";

export function recordUsage(gw: GatewayState, signals: RouteSignals, usage: unknown, scope?: HitScope & { sessionId?: string }): void {
  gw.metrics.usage(usage, scope);
  if (usage === null || typeof usage !== "object") return;
  const { prompt_tokens: prompt, prompt_tokens_details: d, completion_tokens: completion } = usage as {
    prompt_tokens?: unknown; prompt_tokens_details?: { cached_tokens?: unknown } | null; completion_tokens?: unknown;
  };
  const cached = d?.cached_tokens;
  // An engine that does not report cached tokens says nothing about the prediction (0 would read as a total miss).
  if (typeof prompt !== "number" || !(prompt > 0) || typeof cached !== "number" || !(cached >= 0)) return;
  gw.router.reportUsage({
    worker: signals.worker, dpRank: signals.dpRank, predictedTokens: signals.cachedTokens, reportedTokens: cached, promptTokens: prompt,
    completionTokens: typeof completion === "number" && completion >= 0 ? completion : undefined, sessionId: scope?.sessionId,
  });
}
