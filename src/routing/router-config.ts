/** @module Router settings, their defaults (the reference router's where it has one) and validation. */
import { KvgateError } from "../core/errors.ts";
import { validatePolicy, type RoutingPolicy } from "./routing-policy.ts";

export type QueuePolicy = "fcfs" | "lcfs" | "wspt";
export type AffinityMode = "hard" | "soft";

export interface BusyThresholds {
  /** A rank is busy when active decode blocks / total KV blocks exceed this (needs totalKvBlocks). */
  activeDecodeBlocksFrac?: number;
  /** A rank is busy when its active prefill tokens exceed this absolute number. */
  activePrefillTokens?: number;
  /** A rank is busy when active prefill tokens exceed this fraction of max batched tokens (needs maxBatchedTokens). */
  activePrefillTokensFrac?: number;
  /** A rank is busy when its engine reports more than this many waiting requests (needs engine metrics). */
  engineWaiting?: number;
  /** A rank is busy when its engine reports KV-cache usage above this fraction (needs engine metrics). */
  engineKvUsage?: number;
  /** A rank whose engine metrics went stale counts as busy (set when the gateway scrapes engine metrics). */
  engineStale?: boolean;
}

export interface RouterConfig {
  /** How a worker is chosen: the KV cost function (default) or a cache-blind baseline (see routing-policy.ts). */
  policy: RoutingPolicy;
  /**
   * Weight of uncached prefill blocks (the prompt's and those queued on the worker) against decode blocks. The
   * reference uses 1; kvgate's default 16 won p99 TTFT against it in saturated replays (README, Replay report).
   */
  overlapWeight: number;
  /**
   * How much more a block this prompt must prefill weighs than a block already queued on the worker: both delay its
   * first token alike, but the new one is work the fleet does again and pushes other prefixes out of that cache.
   * The reference's cost is 1.
   */
  newPrefillFactor: number;
  /**
   * A KV-event worker's overlap with a prompt includes the blocks an in-flight prompt there is prefilling: its engine
   * will have stored them by the time this one runs, though no event has said so yet. The reference counts only
   * stored blocks, so a request sharing a prefix with one still in prefill looks uncached everywhere.
   */
  inflightCached: boolean;
  temperature: number;
  /** Count prompt blocks shared by in-flight requests once per worker (the reference's "assume KV reuse"). */
  assumeKvReuse: boolean;
  /** Park a request when every eligible rank has more than threshold × max batched tokens of prefill; null disables. */
  queueThreshold: number | null;
  queuePolicy: QueuePolicy;
  /** Most requests parked at once; further ones are rejected (429). */
  queueMaxLength: number;
  /** Longest a request may wait in the queue before it is rejected (429); Infinity disables. */
  queueMaxWaitMs: number;
  /** Retry-After suggested with a queue rejection. */
  retryAfterMs: number;
  busy: BusyThresholds;
  /** Bookings older than this are force-freed so a lost stream cannot leak load forever. */
  staleBookingMs: number;
  /** Stale bookings are looked for at most this often on the booking path (tick() always looks). */
  staleCheckEveryMs: number;
  /** Header the gateway reads the session id from. */
  sessionHeader: string;
  affinityMode: AffinityMode;
  /** Idle time after the last request of a session ends before its binding is forgotten; 0 disables affinity. */
  sessionTtlMs: number;
  sessionMaxEntries: number;
  sessionMaxIdBytes: number;
  /** Lifetime of a two-phase plan from its commit: one not completed or cancelled by then is freed. */
  planTtlMs: number;
  /** Two-phase plans open at once (commits still being admitted included); more are refused (503). */
  maxOpenPlans: number;
  /** TTL of blocks recorded for approximate-mode workers (the closed loop's starting point per rank). */
  approxTtlMs: number;
  /**
   * Check every response's reported cached tokens against the prediction: distrust a precise rank whose index went
   * stale, learn each approximate rank's block lifetime. Off = open loop (the reference router's behaviour).
   */
  closedLoop: boolean;
  /**
   * Count the KV blocks each booking is expected to grow to while decoding (output length predicted from its
   * session, its max_tokens, the fleet's recent answers), not only its prompt blocks. Off = the reference's count.
   */
  decodeAware: boolean;
  /**
   * Serve a hot prompt prefix (its first block) from k workers, k following its share of the fleet's booked work,
   * instead of scoring every worker for it (see HotPrefixes). Off = the reference's choice among all candidates.
   */
  hotPrefixSpread: boolean;
  /** Seed of the default random source (ignored when one is injected). */
  seed: number;
}

export type RouterConfigInput = Partial<Omit<RouterConfig, "busy">> & { busy?: BusyThresholds };

/** Max batched tokens assumed for a worker that does not report it: large enough that it never looks busy. */
export const DEFAULT_MAX_BATCHED_TOKENS = 10_000_000;

/** The reference router's default overlap weight (its `overlap_score_weight`). */
export const REFERENCE_OVERLAP_WEIGHT = 1;

export const DEFAULT_CONFIG: RouterConfig = {
  policy: "kv",
  overlapWeight: 16,
  newPrefillFactor: 1.5,
  inflightCached: true,
  temperature: 0,
  assumeKvReuse: true,
  queueThreshold: 4,
  queuePolicy: "fcfs",
  queueMaxLength: 1024,
  queueMaxWaitMs: 60_000,
  retryAfterMs: 1_000,
  busy: {},
  staleBookingMs: 300_000,
  staleCheckEveryMs: 30_000,
  sessionHeader: "x-session-id",
  affinityMode: "hard",
  sessionTtlMs: 300_000,
  sessionMaxEntries: 65_536,
  sessionMaxIdBytes: 256,
  planTtlMs: 300_000,
  maxOpenPlans: 4096,
  approxTtlMs: 120_000,
  closedLoop: true,
  decodeAware: true,
  hotPrefixSpread: true,
  seed: 0x6b76_6761,
};

function bad(message: string): never {
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message);
}

function nonNegative(name: string, v: number | undefined): void {
  if (v !== undefined && !(v >= 0)) bad(`${name} must be >= 0, got ${v}`);
}

export function validateBusy(b: BusyThresholds): BusyThresholds {
  nonNegative("busy.activeDecodeBlocksFrac", b.activeDecodeBlocksFrac);
  nonNegative("busy.activePrefillTokens", b.activePrefillTokens);
  nonNegative("busy.activePrefillTokensFrac", b.activePrefillTokensFrac);
  nonNegative("busy.engineWaiting", b.engineWaiting);
  nonNegative("busy.engineKvUsage", b.engineKvUsage);
  return { ...b };
}

export function resolveConfig(input: RouterConfigInput = {}): RouterConfig {
  const c: RouterConfig = { ...DEFAULT_CONFIG, ...input, busy: validateBusy(input.busy ?? {}) };
  validatePolicy(c.policy);
  nonNegative("overlapWeight", c.overlapWeight);
  if (!(c.newPrefillFactor >= 1 && c.newPrefillFactor <= 64)) bad(`newPrefillFactor must be in [1, 64], got ${c.newPrefillFactor}`);
  nonNegative("temperature", c.temperature);
  if (c.queueThreshold !== null) nonNegative("queueThreshold", c.queueThreshold);
  if (!["fcfs", "lcfs", "wspt"].includes(c.queuePolicy)) bad(`unknown queue policy ${String(c.queuePolicy)}`);
  if (!["hard", "soft"].includes(c.affinityMode)) bad(`unknown affinity mode ${String(c.affinityMode)}`);
  if (!Number.isInteger(c.queueMaxLength) || c.queueMaxLength < 0) bad("queueMaxLength must be a non-negative integer");
  for (const k of ["queueMaxWaitMs", "retryAfterMs", "staleCheckEveryMs", "sessionTtlMs"] as const) nonNegative(k, c[k]);
  for (const k of ["staleBookingMs", "planTtlMs", "approxTtlMs"] as const) {
    if (!(c[k] > 0)) bad(`${k} must be > 0, got ${c[k]}`);
  }
  if (!Number.isInteger(c.maxOpenPlans) || c.maxOpenPlans < 0) bad("maxOpenPlans must be a non-negative integer");
  if (!Number.isInteger(c.sessionMaxEntries) || c.sessionMaxEntries < 1) bad("sessionMaxEntries must be a positive integer");
  if (!Number.isInteger(c.sessionMaxIdBytes) || c.sessionMaxIdBytes < 1) bad("sessionMaxIdBytes must be a positive integer");
  if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(c.sessionHeader)) bad(`sessionHeader must be a lower-case header name, got ${c.sessionHeader}`);
  return c;
}
