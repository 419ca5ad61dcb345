/**
 * @module vLLM's KV-cache events as plain objects (docs/kv-events.md): what the simulated engine emits and the object
 * decoder returns; the ingestion hot path never builds them.
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
