/**
 * @module Decodes a KVEventBatch into plain event objects with the hot path's reader and rules, for tests, the simulated
 * engine and debugging; the router itself decodes straight to records (batch-preparer.ts).
 */
import { readKvEventBatch } from "./batch-reader.ts";
import { EventScratch, TAG_CLEARED, TAG_REMOVED, TAG_STORED } from "./event-scratch.ts";
import { MEDIUM_GPU, type KvCacheEvent, type KvEventBatch } from "./kv-event-types.ts";
import { MsgpackCursor } from "./msgpack-cursor.ts";

export interface DecodedKvEventBatch extends KvEventBatch {
  /** Events with a tag this decoder does not know (newer engine kinds), left out of `events`. */
  skipped: number;
}

function hashes(pairs: Uint32Array, n: number): bigint[] {
  const out = new Array<bigint>(n);
  for (let i = 0; i < n; i++) out[i] = (BigInt(pairs[2 * i + 1]!) << 32n) | BigInt(pairs[2 * i]!);
  return out;
}

function toEvent(e: EventScratch): KvCacheEvent | undefined {
  switch (e.tag) {
    case TAG_STORED:
      return {
        type: "BlockStored",
        block_hashes: hashes(e.hashes, e.nHashes),
        parent_block_hash: e.hasParent ? hashes(e.parent, 1)[0]! : null,
        token_ids: Array.from(e.tokens.subarray(0, e.nTokens)),
        block_size: e.blockSize,
        lora_id: e.loraId,
        medium: e.medium ?? MEDIUM_GPU,
        lora_name: e.loraName,
      };
    case TAG_REMOVED:
      return { type: "BlockRemoved", block_hashes: hashes(e.hashes, e.nHashes), medium: e.medium ?? MEDIUM_GPU };
    case TAG_CLEARED:
      return { type: "AllBlocksCleared" };
    default:
      return undefined;
  }
}

/** Throws KvgateError KVGATE_ERR_CORRUPT_EVENT when the payload is not a KVEventBatch. */
export function decodeKvEventBatch(bytes: Uint8Array): DecodedKvEventBatch {
  const events: KvCacheEvent[] = [];
  let skipped = 0;
  const env = readKvEventBatch(new MsgpackCursor(), bytes, new EventScratch(), (e) => {
    const d = toEvent(e);
    if (d) events.push(d);
    else skipped++;
  });
  return { ts: env.ts, events, data_parallel_rank: env.rank, skipped };
}
