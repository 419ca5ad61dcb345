/** @module The routing engine's public surface, in one import for the gateway. */
export { Router, isQueueRejected, queueRejectedError } from "./router.ts";
export type { CommitOutcome, RouteOutcome, RouterDeps, RouterObserver, FreedInfo, TickReport } from "./router.ts";
export { RequestHandle } from "./request-handle.ts";
export type { PlanClosed, PlanState, PlanView } from "./two-phase.ts";
export type { PrefillProbe } from "./prefill-probe.ts";
export { parseRoutingExtension, sessionIdFrom } from "./request-extension.ts";
export type { RoutingExtension } from "./request-extension.ts";
export { DEFAULT_CONFIG, DEFAULT_MAX_BATCHED_TOKENS, resolveConfig } from "./router-config.ts";
export type { RouterConfig, RouterConfigInput, BusyThresholds, QueuePolicy, AffinityMode } from "./router-config.ts";
export { ManualClock, performanceNow } from "./clock.ts";
export type { NowFn } from "./clock.ts";
export type { EngineReport } from "./rank-load.ts";
export { createPrng } from "./prng.ts";
export type { RandomSource } from "./prng.ts";
export type * from "./routing-types.ts";
export { ROUTING_POLICIES, validatePolicy } from "./routing-policy.ts";
export type { RoutingPolicy } from "./routing-policy.ts";
export type { WorkerEntry, RankState } from "./worker-registry.ts";
