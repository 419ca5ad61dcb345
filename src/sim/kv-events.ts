/**
 * @module vLLM's KV-cache events as the simulated engine emits them (vllm/distributed/kv_events.py field names).
 *
 * Block hashes: the sim publishes each block's chained **sequence hash** (u64; XXH3 seed 1337 over the parent's
 * sequence hash and the block's local hash, see block-hasher.ts) as `block_hashes` / `parent_block_hash`. vLLM
 * publishes the low 64 bits of its own sha256 chain instead; consumers must treat the value as an opaque id
 * either way (kvgate's router hashes `token_ids` itself), and the sim's choice lets tests compare directly.
 */

/** vLLM's `MEDIUM_GPU`: every block of the sim lives on the (simulated) GPU. */
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

export function blockStored(parent: bigint | null, hashes: bigint[], tokens: number[], blockSize: number): BlockStoredEvent {
  return {
    type: "BlockStored",
    block_hashes: hashes,
    parent_block_hash: parent,
    token_ids: tokens,
    block_size: blockSize,
    lora_id: null,
    medium: MEDIUM_GPU,
    lora_name: null,
  };
}

export function blockRemoved(hashes: bigint[]): BlockRemovedEvent {
  return { type: "BlockRemoved", block_hashes: hashes, medium: MEDIUM_GPU };
}

export const ALL_BLOCKS_CLEARED: AllBlocksClearedEvent = Object.freeze({ type: "AllBlocksCleared" }) as AllBlocksClearedEvent;
