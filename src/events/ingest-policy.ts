/**
 * @module Which engine events become index entries (block size, storage tiers, KV-cache group, extra keys): the rules
 * stated once, apart from decoding.
 */
import { KvgateError } from "../core/errors.ts";

export type StorageTier = "device" | "host" | "disk" | "external";

export type TierWeights = Record<StorageTier, number>;

/** Only GPU (device) blocks are indexed today; the other weights are kept for a tier-aware scorer. */
export const DEFAULT_TIER_WEIGHTS: Readonly<TierWeights> = Object.freeze({ device: 1, host: 0, disk: 0, external: 0 });

/** Core limit on tokens per block (assembly/hash/prompt.ts MAX_BLOCK_SIZE). */
const MAX_BLOCK_SIZE = 8192;

export interface IngestPolicyOptions {
  /** Tokens per KV block of this worker; events with another block size are dropped and counted. */
  blockSize: number;
  /** Weight per storage tier; recorded for scoring, only "device" is indexed. */
  tierWeights?: Partial<TierWeights>;
  /** When set, only events of this KV-cache group (group_idx) are used; events without a group_idx always are. */
  kvGroup?: number;
  /**
   * Drop Stored events whose extra_keys carry more than the LoRA name (multimodal hashes, cache_salt, prompt
   * embeds): kvgate hashes token ids only, so indexing them would match prompts whose KV differs. Default true.
   */
  dropForeignExtraKeys?: boolean;
}

export interface IngestPolicy {
  readonly blockSize: number;
  readonly tierWeights: Readonly<TierWeights>;
  readonly kvGroup: number | undefined;
  readonly dropForeignExtraKeys: boolean;
}

export function resolvePolicy(o: IngestPolicyOptions): IngestPolicy {
  if (!Number.isInteger(o.blockSize) || o.blockSize < 1 || o.blockSize > MAX_BLOCK_SIZE) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `blockSize must be an integer in 1..${MAX_BLOCK_SIZE}, got ${o.blockSize}`);
  }
  if (o.kvGroup !== undefined && !(Number.isInteger(o.kvGroup) && o.kvGroup >= 0)) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `kvGroup must be a non-negative integer, got ${o.kvGroup}`);
  }
  const tierWeights = { ...DEFAULT_TIER_WEIGHTS, ...o.tierWeights };
  for (const [k, v] of Object.entries(tierWeights)) {
    if (!(v >= 0)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `tier weight ${k} must be ≥ 0, got ${v}`);
  }
  return Object.freeze({
    blockSize: o.blockSize,
    tierWeights: Object.freeze(tierWeights),
    kvGroup: o.kvGroup,
    dropForeignExtraKeys: o.dropForeignExtraKeys ?? true,
  });
}

/** The tier index of each storage tier (for per-tier counters). */
export const TIERS: readonly StorageTier[] = ["device", "host", "disk", "external"];

/**
 * vLLM's and SGLang's `medium` names mapped to a tier (Dynamo's mapping, dynamo-kv-router.md §3.1). No medium means
 * the GPU. Unknown names are treated as external: never indexed by default, counted.
 */
export function tierOf(medium: string | null): StorageTier {
  if (medium === null || medium === "GPU") return "device";
  switch (medium.toUpperCase()) {
    case "GPU": case "DEVICE": case "CUDA": return "device";
    case "CPU": case "CPU_PINNED": case "CPU_TIER1": case "HOST": case "HOST_PINNED": return "host";
    case "CPU_TIER2": case "DISK": case "NVME": case "SSD": return "disk";
    default: return "external";
  }
}

/** Whether blocks on this tier are indexed. */
export function indexesTier(policy: IngestPolicy, tier: StorageTier): boolean {
  return tier === "device" && policy.tierWeights.device > 0;
}
