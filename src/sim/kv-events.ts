/**
 * @module vLLM's KV-cache events as the simulated engine emits them; its block hash is its own XXH3 sequence hash, opaque
 * to the router like vLLM's, so tests can compare directly (docs/kv-events.md).
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
