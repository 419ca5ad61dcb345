/**
 * @module msgpack encoding of vLLM KVEventBatch payloads, byte for byte as msgspec writes them, in both event encodings
 * (docs/kv-events.md#the-batch).
 */
import { encode } from "@msgpack/msgpack";
import type { KvCacheEvent, KvEventBatch } from "./kv-events.ts";

export type KvEventEncoding = "array" | "map";

/** vLLM ≥ 0.26 also writes these per BlockStored/BlockRemoved; the sim models one full-attention KV group. */
const GROUP_IDX = 0;
const SPEC_KIND = "full_attention";

/** Hashes below 2^32 as numbers so they get msgspec's shortest integer form; larger ones stay uint64 BigInts. */
function wireHash(h: bigint): number | bigint {
  return h <= 0xffffffffn ? Number(h) : h;
}

function arrayEvent(e: KvCacheEvent): unknown[] {
  switch (e.type) {
    case "BlockStored":
      return [e.type, e.block_hashes.map(wireHash), e.parent_block_hash === null ? null : wireHash(e.parent_block_hash),
        e.token_ids, e.block_size, e.lora_id, e.medium, e.lora_name, ...(e.extra_keys ? [e.extra_keys] : [])];
    case "BlockRemoved":
      return [e.type, e.block_hashes.map(wireHash), e.medium];
    case "AllBlocksCleared":
      return [e.type];
  }
}

function mapEvent(e: KvCacheEvent): Record<string, unknown> {
  switch (e.type) {
    case "BlockStored":
      return {
        type: e.type,
        block_hashes: e.block_hashes.map(wireHash),
        parent_block_hash: e.parent_block_hash === null ? null : wireHash(e.parent_block_hash),
        token_ids: e.token_ids,
        block_size: e.block_size,
        lora_id: e.lora_id,
        medium: e.medium,
        lora_name: e.lora_name,
        extra_keys: e.extra_keys ?? e.block_hashes.map(() => null),
        group_idx: GROUP_IDX,
        kv_cache_spec_kind: SPEC_KIND,
      };
    case "BlockRemoved":
      return { type: e.type, block_hashes: e.block_hashes.map(wireHash), medium: e.medium, group_idx: GROUP_IDX };
    case "AllBlocksCleared":
      return { type: e.type };
  }
}

/** msgpack bytes of a KVEventBatch. */
export function encodeKvEventBatch(batch: KvEventBatch, encoding: KvEventEncoding = "array"): Uint8Array<ArrayBuffer> {
  const toWire: (e: KvCacheEvent) => unknown = encoding === "map" ? mapEvent : arrayEvent;
  const events = encode(batch.events.map(toWire), { useBigInt64: true });
  const rank = encode(batch.data_parallel_rank);
  const out = new Uint8Array(1 + 9 + events.length + rank.length);
  out[0] = 0x93; // fixarray of 3
  out[1] = 0xcb; // float64, even when ts happens to be a whole number
  new DataView(out.buffer).setFloat64(2, batch.ts, false);
  out.set(events, 10);
  out.set(rank, 10 + events.length);
  return out;
}
