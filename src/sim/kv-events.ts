/**
 * @module vLLM's KV-cache events as the simulated engine emits them; its block hash is its own XXH3 sequence hash, opaque
 * to the router like vLLM's, so tests can compare directly (docs/kv-events.md).
 */

import type { HashSalt } from "./block-hasher.ts";
import { MEDIUM_GPU, type AllBlocksClearedEvent, type BlockRemovedEvent, type BlockStoredEvent } from "../events/kv-event-types.ts";

// The event types live with the decoder in src/events (one wire format for the sim and the router).
export {
  MEDIUM_GPU, type AllBlocksClearedEvent, type BlockRemovedEvent, type BlockStoredEvent, type KvCacheEvent, type KvEventBatch,
} from "../events/kv-event-types.ts";

/**
 * vLLM's extra keys per block: the adapter's name on every block, and the request's cache_salt on its first block
 * only (start_token_idx 0), which is block 0 of an event without a parent. Null when no block has any.
 */
function extraKeys(parent: bigint | null, n: number, salt: HashSalt): (string[] | null)[] | null {
  if (!salt.lora && !(salt.cacheSalt && parent === null)) return null;
  return Array.from({ length: n }, (_, i) => {
    const keys = salt.lora ? [salt.lora] : [];
    if (i === 0 && parent === null && salt.cacheSalt) keys.push(salt.cacheSalt);
    return keys.length > 0 ? keys : null;
  });
}

export function blockStored(parent: bigint | null, hashes: bigint[], tokens: number[], blockSize: number, salt: HashSalt = {}): BlockStoredEvent {
  const extra = extraKeys(parent, hashes.length, salt);
  return {
    type: "BlockStored",
    block_hashes: hashes,
    parent_block_hash: parent,
    token_ids: tokens,
    block_size: blockSize,
    lora_id: null,
    medium: MEDIUM_GPU,
    lora_name: salt.lora ?? null,
    ...(extra ? { extra_keys: extra } : {}),
  };
}

export function blockRemoved(hashes: bigint[]): BlockRemovedEvent {
  return { type: "BlockRemoved", block_hashes: hashes, medium: MEDIUM_GPU };
}

export const ALL_BLOCKS_CLEARED: AllBlocksClearedEvent = Object.freeze({ type: "AllBlocksCleared" }) as AllBlocksClearedEvent;
