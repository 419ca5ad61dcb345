// The strings an engine KV-event batch is keyed by (vllm/distributed/kv_events.py, SGLang), as static bytes, and
// the matchers that turn a msgpack str at the cursor into a field id. Strings compare as bytes, never decoded.
import { bytesEq } from "./msgpack";

/** "type" */
const K_TYPE: usize = memory.data<u8>([0x74, 0x79, 0x70, 0x65]);
/** "block_hashes" */
const K_BLOCK_HASHES: usize = memory.data<u8>([0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x5f, 0x68, 0x61, 0x73, 0x68, 0x65, 0x73]);
/** "parent_block_hash" */
const K_PARENT: usize = memory.data<u8>([0x70, 0x61, 0x72, 0x65, 0x6e, 0x74, 0x5f, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x5f, 0x68, 0x61, 0x73, 0x68]);
/** "token_ids" */
const K_TOKEN_IDS: usize = memory.data<u8>([0x74, 0x6f, 0x6b, 0x65, 0x6e, 0x5f, 0x69, 0x64, 0x73]);
/** "block_size" */
const K_BLOCK_SIZE: usize = memory.data<u8>([0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x5f, 0x73, 0x69, 0x7a, 0x65]);
/** "lora_id" */
const K_LORA_ID: usize = memory.data<u8>([0x6c, 0x6f, 0x72, 0x61, 0x5f, 0x69, 0x64]);
/** "medium" */
const K_MEDIUM: usize = memory.data<u8>([0x6d, 0x65, 0x64, 0x69, 0x75, 0x6d]);
/** "lora_name" */
const K_LORA_NAME: usize = memory.data<u8>([0x6c, 0x6f, 0x72, 0x61, 0x5f, 0x6e, 0x61, 0x6d, 0x65]);
/** "extra_keys" */
const K_EXTRA_KEYS: usize = memory.data<u8>([0x65, 0x78, 0x74, 0x72, 0x61, 0x5f, 0x6b, 0x65, 0x79, 0x73]);
/** "group_idx" */
const K_GROUP_IDX: usize = memory.data<u8>([0x67, 0x72, 0x6f, 0x75, 0x70, 0x5f, 0x69, 0x64, 0x78]);
/** "kv_cache_spec_kind" */
const K_SPEC_KIND: usize = memory.data<u8>([0x6b, 0x76, 0x5f, 0x63, 0x61, 0x63, 0x68, 0x65, 0x5f, 0x73, 0x70, 0x65, 0x63, 0x5f, 0x6b, 0x69, 0x6e, 0x64]);
/** "BlockStored" */
const T_STORED: usize = memory.data<u8>([0x42, 0x6c, 0x6f, 0x63, 0x6b, 0x53, 0x74, 0x6f, 0x72, 0x65, 0x64]);
/** "BlockRemoved" */
const T_REMOVED: usize = memory.data<u8>([0x42, 0x6c, 0x6f, 0x63, 0x6b, 0x52, 0x65, 0x6d, 0x6f, 0x76, 0x65, 0x64]);
/** "AllBlocksCleared" */
const T_CLEARED: usize = memory.data<u8>([0x41, 0x6c, 0x6c, 0x42, 0x6c, 0x6f, 0x63, 0x6b, 0x73, 0x43, 0x6c, 0x65, 0x61, 0x72, 0x65, 0x64]);
/** "ts" */
const B_TS: usize = memory.data<u8>([0x74, 0x73]);
/** "events" */
const B_EVENTS: usize = memory.data<u8>([0x65, 0x76, 0x65, 0x6e, 0x74, 0x73]);
/** "data_parallel_rank" */
const B_DP_RANK: usize = memory.data<u8>([0x64, 0x61, 0x74, 0x61, 0x5f, 0x70, 0x61, 0x72, 0x61, 0x6c, 0x6c, 0x65, 0x6c, 0x5f, 0x72, 0x61, 0x6e, 0x6b]);
/** "attn_dp_rank" */
const B_ATTN_DP_RANK: usize = memory.data<u8>([0x61, 0x74, 0x74, 0x6e, 0x5f, 0x64, 0x70, 0x5f, 0x72, 0x61, 0x6e, 0x6b]);
/** "dp_rank" */
const B_DP_RANK_SHORT: usize = memory.data<u8>([0x64, 0x70, 0x5f, 0x72, 0x61, 0x6e, 0x6b]);
/** "GPU" */
const M_GPU: usize = memory.data<u8>([0x47, 0x50, 0x55]);
/** "CPU" */
const M_CPU: usize = memory.data<u8>([0x43, 0x50, 0x55]);
/** "full_attention" */
const S_FULL_ATTENTION: usize = memory.data<u8>([0x66, 0x75, 0x6c, 0x6c, 0x5f, 0x61, 0x74, 0x74, 0x65, 0x6e, 0x74, 0x69, 0x6f, 0x6e]);

// Field ids: BlockStored's positions in the legacy array form (tag at 0), as in src/events/event-scratch.ts.
export const F_SKIP: i32 = 0;
export const F_HASHES: i32 = 1;
export const F_PARENT: i32 = 2;
export const F_TOKENS: i32 = 3;
export const F_BLOCK_SIZE: i32 = 4;
export const F_LORA_ID: i32 = 5;
export const F_MEDIUM: i32 = 6;
export const F_LORA_NAME: i32 = 7;
export const F_EXTRA_KEYS: i32 = 8;
export const F_GROUP: i32 = 9;
export const F_SPEC_KIND: i32 = 10;
/** The tag key of the map form. */
export const F_TYPE: i32 = 11;

export const TAG_UNKNOWN: i32 = 0;
export const TAG_STORED: i32 = 1;
export const TAG_REMOVED: i32 = 2;
export const TAG_CLEARED: i32 = 3;

export const BK_OTHER: i32 = -1;
export const BK_TS: i32 = 0;
export const BK_EVENTS: i32 = 1;
export const BK_RANK: i32 = 2;

export const MEDIUM_OTHER: i32 = -1;
export const MEDIUM_GPU: i32 = 0;
export const MEDIUM_CPU: i32 = 1;

/** The field a map key at `p` (`n` bytes) names; F_SKIP for keys this decoder does not read. */
export function eventKey(p: usize, n: u32): i32 {
  switch (n) {
    case 4: return bytesEq(p, K_TYPE, 4) ? F_TYPE : F_SKIP;
    case 6: return bytesEq(p, K_MEDIUM, 6) ? F_MEDIUM : F_SKIP;
    case 7: return bytesEq(p, K_LORA_ID, 7) ? F_LORA_ID : F_SKIP;
    case 9: {
      if (bytesEq(p, K_TOKEN_IDS, 9)) return F_TOKENS;
      if (bytesEq(p, K_GROUP_IDX, 9)) return F_GROUP;
      return bytesEq(p, K_LORA_NAME, 9) ? F_LORA_NAME : F_SKIP;
    }
    case 10: {
      if (bytesEq(p, K_BLOCK_SIZE, 10)) return F_BLOCK_SIZE;
      return bytesEq(p, K_EXTRA_KEYS, 10) ? F_EXTRA_KEYS : F_SKIP;
    }
    case 12: return bytesEq(p, K_BLOCK_HASHES, 12) ? F_HASHES : F_SKIP;
    case 17: return bytesEq(p, K_PARENT, 17) ? F_PARENT : F_SKIP;
    case 18: return bytesEq(p, K_SPEC_KIND, 18) ? F_SPEC_KIND : F_SKIP;
  }
  return F_SKIP;
}

/** The event kind an event tag names; TAG_UNKNOWN for kinds newer than this decoder. */
export function tagOf(p: usize, n: u32): i32 {
  if (n == 11) return bytesEq(p, T_STORED, 11) ? TAG_STORED : TAG_UNKNOWN;
  if (n == 12) return bytesEq(p, T_REMOVED, 12) ? TAG_REMOVED : TAG_UNKNOWN;
  if (n == 16) return bytesEq(p, T_CLEARED, 16) ? TAG_CLEARED : TAG_UNKNOWN;
  return TAG_UNKNOWN;
}

/** A key of the batch map form: ts, events, or one of the rank names vLLM and SGLang use. */
export function batchKey(p: usize, n: u32): i32 {
  switch (n) {
    case 2: return bytesEq(p, B_TS, 2) ? BK_TS : BK_OTHER;
    case 6: return bytesEq(p, B_EVENTS, 6) ? BK_EVENTS : BK_OTHER;
    case 7: return bytesEq(p, B_DP_RANK_SHORT, 7) ? BK_RANK : BK_OTHER;
    case 12: return bytesEq(p, B_ATTN_DP_RANK, 12) ? BK_RANK : BK_OTHER;
    case 18: return bytesEq(p, B_DP_RANK, 18) ? BK_RANK : BK_OTHER;
  }
  return BK_OTHER;
}

export function mediumOf(p: usize, n: u32): i32 {
  if (n != 3) return MEDIUM_OTHER;
  if (bytesEq(p, M_GPU, 3)) return MEDIUM_GPU;
  return bytesEq(p, M_CPU, 3) ? MEDIUM_CPU : MEDIUM_OTHER;
}

export function isFullAttention(p: usize, n: u32): bool {
  return n == 14 && bytesEq(p, S_FULL_ATTENTION, 14);
}
