/** @module Data shapes shared by the routing engine and its callers (gateway, benches, tests): requests, workers, signals. */
import type { RankPrediction } from "./prediction-monitor.ts";

export type { RankPrediction };

/** What a worker does; a request's phase must match the worker's role. */
export type WorkerRole = "aggregated" | "prefill" | "decode";

/** Only healthy workers take new requests; draining ones finish what they hold. */
export type WorkerHealth = "healthy" | "draining" | "unhealthy";

export interface WorkerSpec {
  id: string;
  /** Where the gateway forwards requests (opaque to the router). */
  endpoint: string;
  /** Model names served; a request for another model never lands here. */
  models: readonly string[];
  /** LoRA adapters served beside the models (the names requests and KV events give them). */
  adapters?: readonly string[];
  /** Loads any adapter of its models on demand (vLLM with runtime LoRA updating): a candidate for every adapter. */
  loadsAdapters?: boolean;
  /** Default "aggregated". */
  role?: WorkerRole;
  /** First data-parallel rank. Default 0. */
  dpStart?: number;
  /** Number of data-parallel ranks (each is its own cache and load). Default 1. */
  dpSize?: number;
  /** Tokens per KV block; must equal the engine's and be the same for every worker of a model. */
  blockSize: number;
  /** KV blocks per rank, when the engine reports it (enables the decode-blocks busy threshold). */
  totalKvBlocks?: number;
  /** Max batched tokens per rank, when known (queue threshold and prefill busy fraction). */
  maxBatchedTokens?: number;
  /** False when the worker publishes no KV events: the router records its own decisions (approximate mode). Default true. */
  kvEvents?: boolean;
  /**
   * The engine runs EAGLE speculative decoding: each of its block hashes covers the block and the next block's first
   * token (its KV events carry token bigrams), so prompts routed to it are hashed the same way. Default false; every
   * worker of a model must agree.
   */
  eagle?: boolean;
  /** Initial health. Default "healthy". */
  health?: WorkerHealth;
}

/** Per-request knobs over the router's cost function (request extension field, see request-extension.ts). */
export interface RouteOverrides {
  /** Weight of prefill blocks against decode blocks (>= 0). */
  overlapWeight?: number;
  /** 0 = cheapest worker; > 0 samples a softmax over normalised costs. */
  temperature?: number;
}

/** Sends the request to one worker (and rank). An unknown worker or an ambiguous rank is an error. */
export interface WorkerTarget {
  worker: string;
  dpRank?: number;
}

export interface RouteRequest {
  /** Unique among live bookings. */
  requestId: string;
  /** Prompt token ids; a Uint32Array avoids a copy loop (about 2× faster hashing path). */
  tokens: ArrayLike<number>;
  /** Model name; when absent every worker of the phase is a candidate. */
  model?: string;
  /** Default "aggregated". */
  phase?: WorkerRole;
  /** LoRA adapter (its served name): the block hashes' seed, and only workers serving or loading it are candidates. */
  lora?: string;
  /** Cache namespace (vLLM's cache_salt, a tenant): salts the first block's hash as the engine does (cache-salt.ts). */
  namespace?: string;
  eagle?: boolean;
  overrides?: RouteOverrides;
  target?: WorkerTarget;
  /** Worker ids that must not be chosen (retries after a failure). */
  exclude?: readonly string[];
  /** Queue jump in seconds (FCFS/LCFS) or a weight boost (WSPT). Default 0. */
  priority?: number;
  sessionId?: string;
  /** The client's max_tokens (or max_completion_tokens): caps the output length decode-aware load expects. */
  maxTokens?: number;
  /** Select and report without booking anything. */
  queryOnly?: boolean;
  /** Copy the decision's candidates table into the outcome (the explain header), whatever the sinks want. */
  explain?: boolean;
  /** Aborting removes the request from the queue or session wait, or releases a plan's booking. */
  signal?: AbortSignal;
}

/** Time spent per phase of one routing decision, in the units of the injected fine timer (ms by default). */
export interface RouteTimings {
  /** Block hashing and prefix matching: one crossing into WASM, so the two are measured together. */
  hashMatchMs: number;
  /** Reading block keys, building candidates, scoring and booking. */
  scheduleMs: number;
  /** Waiting in the admission queue or for a session's first binding (injected clock). */
  queueMs: number;
}

/** What the router decided for one request, as the gateway exposes it (headers, metrics, preview responses). */
export interface RouteSignals {
  requestId: string;
  worker: string;
  dpRank: number;
  endpoint: string;
  /** Prompt blocks the chosen worker already caches (contiguous prefix). */
  overlapBlocks: number;
  /** Best overlap over all candidates (equals overlapBlocks unless load won). */
  bestOverlapBlocks: number;
  /** Complete blocks in the prompt. */
  promptBlocks: number;
  requestTokens: number;
  /** Tokens of the prompt's complete blocks the index says the chosen rank holds. */
  cachedTokens: number;
  /**
   * cachedTokens times the closed loop's learnt ratio of reported to predicted hits for that rank: what its engine
   * is expected to report as cached (equal to cachedTokens until the rank has history).
   */
  expectedCachedTokens: number;
  /** overlapBlocks / promptBlocks (0 for a prompt shorter than a block). */
  predictedHitRate: number;
  potentialPrefillTokens: number;
  /** Prefill tokens queued on the chosen rank before this request when it was routed. */
  queuedPrefillTokens: number;
  potentialDecodeBlocks: number;
  totalKvBlocks?: number;
  cost: number;
  /** How the worker was chosen. */
  via: "scored" | "target" | "session";
  queueDepth: number;
  timings: RouteTimings;
}

/** Why the admission queue turned a request away; the gateway answers 429 with Retry-After. */
export interface QueueRejection {
  limit: "length" | "wait";
  current: number;
  max: number;
  retryAfterMs: number;
}

export type FreeReason = "finished" | "failed" | "cancelled" | "expired" | "worker_removed" | "plan_expired";

/** Load of one (worker, rank), for metrics and the admin API. */
export interface RankLoadSnapshot {
  worker: string;
  dpRank: number;
  role: WorkerRole;
  health: WorkerHealth;
  activeRequests: number;
  activeBlocks: number;
  activePrefillTokens: number;
  /** KV blocks the live bookings are expected to grow by while decoding (decode-aware load). */
  expectedOutputBlocks: number;
  totalKvBlocks?: number;
  maxBatchedTokens?: number;
  /** Bookings other router replicas hold on this rank (shared over NATS). */
  remote: { requests: number; prefillTokens: number; blocks: number };
}

export interface RouterSnapshot {
  queueDepth: number;
  liveBookings: number;
  sessions: number;
  openPlans: number;
  ranks: RankLoadSnapshot[];
  /** The closed loop's per-rank figures (ranks with at least one response that reported usage). */
  predictions: RankPrediction[];
  /** Hot-prefix spreading (absent when off): prefixes tracked, spread over ≥ 2 workers now, decisions it restricted. */
  hotPrefixes?: { tracked: number; spread: number; decisions: number };
}
