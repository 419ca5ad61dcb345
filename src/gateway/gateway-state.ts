/**
 * @module The objects one gateway instance shares across requests, and the per-request record (Exchange) that
 * dispatch, streaming and migration pass around. Types only, so every module can import them cheaply.
 */
import type { KvIndex } from "../core/kv-index.ts";
import type { HedgePolicy } from "./hedge-policy.ts";
import type { NowFn, RouteSignals, Router, RoutingExtension, WorkerHealth } from "../routing/index.ts";
import type { TokenizerRegistry } from "../tokenize/index.ts";
import type { GatewayConfig } from "./config.ts";
import type { Fleet } from "./fleet.ts";
import type { GatewayMetrics } from "./gateway-metrics.ts";
import type { KvIngest } from "./kv-ingest.ts";
import type { Endpoint, PromptTokenizerPool } from "./prompt-tokens.ts";
import type { EngineMetricsScraper } from "./engine-metrics.ts";
import type { WorkerHealthMonitor } from "./worker-health.ts";
import type { DecisionRing } from "./decision-ring.ts";
import type { Tracing } from "../observability/tracing.ts";
import type { RequestTrace } from "./request-trace.ts";
import type { StreamLeases } from "./stream-leases.ts";

export type LogFn = (level: "info" | "warn", message: string) => void;

/** Told of the admin API's worker changes once applied (router replicas share them: src/replicas/registry-share.ts). */
export interface AdminChanges {
  workerAdded(id: string): void;
  workerRemoved(id: string): void;
  workerHealth(id: string, health: WorkerHealth): void;
}

export interface GatewayState {
  readonly config: GatewayConfig;
  readonly index: KvIndex;
  readonly router: Router;
  readonly fleet: Fleet;
  readonly registry: TokenizerRegistry;
  readonly tokenizers: PromptTokenizerPool;
  readonly metrics: GatewayMetrics;
  readonly health: WorkerHealthMonitor;
  readonly engineMetrics: EngineMetricsScraper;
  readonly ingest: KvIngest;
  /** The last config.decisions.recent routing decisions with their candidates (for /v1/stats and the dashboard). */
  readonly decisions: DecisionRing;
  /** OpenTelemetry tracing (tracer undefined: off). */
  readonly tracing: Tracing;
  /** TTFT hedging's learnt thresholds and budget (disabled unless --hedge-budget > 0). */
  readonly hedge: HedgePolicy;
  /** Bookings of streamed responses held on a lease where the runtime may drop a gone client silently. */
  readonly leases: StreamLeases;
  /**
   * The routing signals of each open route plan, so the usage a proxy reports on completion reaches the closed loop
   * as kvgate's own answers do; an entry goes when its plan closes (bounded by --max-open-plans).
   */
  readonly planSignals: Map<string, RouteSignals>;
  /** The adapter takes streamed answers through their direct source (GatewayHost.takesDirectSources). */
  readonly takesDirectSources: boolean;
  /** Transport to the workers (the global fetch unless a host or test injects one). */
  readonly fetch: typeof fetch;
  /** Milliseconds, monotonic: the router's clock. */
  readonly now: NowFn;
  /** Fine timer for latency metrics (ms). */
  readonly fineNow: NowFn;
  readonly log: LogFn;
  newRequestId(): string;
  /** Set when router replicas share the worker registry. */
  adminChanges?: AdminChanges;
}

/** One client request on its way through kvgate (one per chat/completions call, across retries and migrations). */
export interface Exchange {
  readonly endpoint: Endpoint;
  /** Upstream path, e.g. /v1/chat/completions. */
  readonly path: string;
  /** The base model (an adapter's parent): what the router filters by. */
  readonly model: string | undefined;
  /** LoRA adapter (model name of an adapter, or SGLang's lora_path): salts the hashes, filters the workers. */
  readonly adapter: string | undefined;
  /** Cache namespace (cache_salt or the tenant header): salts the first block's hash. */
  readonly namespace: string | undefined;
  /** The model whose tokenizer renders the prompt. */
  readonly tokenizerModel: string | undefined;
  /** The body workers get: the `kvgate` routing field removed, include_usage added when kvgate asked for it. */
  readonly body: Record<string, unknown>;
  readonly bodyText: string;
  /** Prompt tokens as routed (capped at the index's longest prompt: the prefix is what caches share). */
  readonly tokens: Uint32Array;
  readonly tokenizeMs: number;
  readonly stream: boolean;
  /** kvgate added include_usage: the usage-only chunk is not forwarded. */
  readonly stripUsage: boolean;
  /** The router's id for this request (kvgate's own, so clients cannot collide). */
  readonly requestId: string;
  readonly headers: Headers;
  readonly ext: RoutingExtension;
  readonly sessionId: string | undefined;
  /** The client's max_tokens / max_completion_tokens, when it is a positive integer. */
  readonly maxTokens: number | undefined;
  /** Aborted when the client goes away. */
  readonly signal: AbortSignal;
  /** fineNow() at arrival. */
  readonly arrivedAt: number;
  /** The client asked (x-kvgate-explain: 1, with the admin token when one is set) for the decision's candidates table. */
  readonly explain: boolean;
  /** The request's spans (an inert shared instance when tracing is off). */
  readonly trace: RequestTrace;
  /** Workers that failed this request (never chosen again for it). */
  readonly excluded: string[];
  retriesLeft: number;
  migrationsLeft: number;
}
