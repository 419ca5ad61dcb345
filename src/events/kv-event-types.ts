/**
 * @module vLLM's KV-cache events as plain objects (field names of vllm/distributed/kv_events.py): what the simulated
 * engine emits and what the object decoder returns. The ingestion hot path never builds these; it decodes straight
 * to the index's binary records (batch-preparer.ts).
 *
 * Block hashes are opaque ids per (worker, rank): vLLM publishes the low 64 bits of its own sha256 chain, SGLang a
 * signed 64-bit value (folded to uint64 here), the simulated engine its XXH3 sequence hash.
 */

/** vLLM's `MEDIUM_GPU`. */
export const MEDIUM_GPU = "GPU";

export interface BlockStoredEvent {
  type: "BlockStored";
  /** One hash per block, in prompt order. */
  block_hashes: bigint[];
  /** Hash of the block before the first one; null at the root of a sequence. */
  parent_block_hash: bigint | null;
  /** Every token of those blocks: `block_hashes.length × block_size` ids. */
  token_ids: number[];
  block_size: number;
  /** Deprecated in vLLM, always written (nil). */
  lora_id: number | null;
  medium: string | null;
  lora_name: string | null;
  /** Per block: the adapter name, and a sequence's first block the request's cache_salt (vLLM); absent or null: none. */
  extra_keys?: (string[] | null)[] | null;
}

export interface BlockRemovedEvent {
  type: "BlockRemoved";
  block_hashes: bigint[];
  medium: string | null;
}

export interface AllBlocksClearedEvent {
  type: "AllBlocksCleared";
}

export type KvCacheEvent = BlockStoredEvent | BlockRemovedEvent | AllBlocksClearedEvent;

/** vLLM's KVEventBatch: `ts` is seconds since the epoch (always a float64 on the wire). */
export interface KvEventBatch {
  ts: number;
  events: KvCacheEvent[];
  data_parallel_rank: number | null;
}
