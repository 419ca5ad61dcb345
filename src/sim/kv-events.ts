/**
 * @module vLLM's KV-cache events as the simulated engine emits them (vllm/distributed/kv_events.py field names).
 *
 * Block hashes: the sim publishes each block's chained **sequence hash** (u64; XXH3 seed 1337 over the parent's
 * sequence hash and the block's local hash, see block-hasher.ts) as `block_hashes` / `parent_block_hash`. vLLM
 * publishes the low 64 bits of its own sha256 chain instead; consumers must treat the value as an opaque id
 * either way (kvgate's router hashes `token_ids` itself), and the sim's choice lets tests compare directly.
 */

import { MEDIUM_GPU, type AllBlocksClearedEvent, type BlockRemovedEvent, type BlockStoredEvent } from "../events/kv-event-types.ts";

// The event types live with the decoder in src/events (one wire format for the sim and the router).
export {
  MEDIUM_GPU, type AllBlocksClearedEvent, type BlockRemovedEvent, type BlockStoredEvent, type KvCacheEvent, type KvEventBatch,
} from "../events/kv-event-types.ts";

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
