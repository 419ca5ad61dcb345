/** @module The contract with the WASM core: export signatures, ABI version and status codes (mirrors assembly/abi.ts). */

export const ABI_VERSION = 3;

export const Status = {
  OK: 0,
  STATE: -1,
  NO_MEMORY: -2,
  BAD_ARG: -3,
  BAD_SLOT: -4,
  CAPACITY: -5,
  PARENT_NOT_FOUND: -6,
  INVALID_SEQUENCE: -7,
  CORRUPT: -8,
  TOO_LONG: -9,
} as const;

/** Indices into the COUNTERS region (u32, cumulative since the instance was created). */
export const Counter = {
  applied: 0,
  parentMissing: 1,
  invalid: 2,
  capacity: 3,
  unknownRemoved: 4,
  badSlot: 5,
  corrupt: 6,
  evicted: 7,
  expired: 8,
  pruned: 9,
  capped: 10,
  memoReused: 11,
  memoHashed: 12,
} as const;
export type CounterName = keyof typeof Counter;

/** Column indices of the scoring region (f64 columns of maxSlots each). */
export const ScoreCol = {
  overlap: 0,
  prefill: 1,
  decode: 2,
  activeOverlap: 3,
  blockSize: 4,
  tree: 5,
  cost: 6,
  potentialPrefill: 7,
  potentialDecode: 8,
} as const;

export interface CoreExports {
  memory: WebAssembly.Memory;
  init(maxSlots: number, capacity: number, maxTokens: number, maxBlocks: number, eventBytes: number, maxMm: number,
    approxMax: number, pruneRatio: number, saltLo: number, saltHi: number, budgetPages: number): number;
  grow_prompt(maxTokens: number, maxBlocks: number): number;
  abi_version(): number;
  tokens_ptr(): number;
  tokens_cap(): number;
  local_ptr(): number;
  seq_ptr(): number;
  needs_ptr(): number;
  blocks_cap(): number;
  mm_ptr(): number;
  mm_cap(): number;
  out_ptr(): number;
  sizes_ptr(): number;
  counters_ptr(): number;
  events_ptr(): number;
  events_cap(): number;
  io_ptr(): number;
  io_cap(): number;
  score_ptr(): number;
  result_ptr(): number;
  last_blocks(): number;
  memory_used(): number;
  entries(): number;
  nodes(): number;
  ttl_entries(): number;
  heap_items(): number;
  hash_bytes(n: number, seedLo: number, seedHi: number): number;
  hash_prompt(nTokens: number, blockSize: number, seedLo: number, seedHi: number, flags: number, nMm: number): number;
  find_matches(nBlocks: number): number;
  route(nTokens: number, blockSize: number, seedLo: number, seedHi: number, flags: number, nMm: number): number;
  slot_open(slot: number): number;
  slot_close(slot: number): number;
  clear_slot(slot: number): number;
  store_blocks(slot: number, hasParent: number, parentLo: number, parentHi: number, n: number): number;
  remove_blocks(slot: number, n: number): number;
  apply_events(nBytes: number): number;
  record_route(slot: number, nBlocks: number, now: number, ttl: number): number;
  slot_clock(slot: number): number;
  expire(now: number): number;
  slot_capacity(slot: number, capacity: number): number;
  match_jump(jump: number): number;
  memo_init(count: number, bytes: number): number;
  dump_cap(): number;
  dump_entries(cursor: number, max: number, now: number): number;
  load_entries(n: number, now: number): number;
  /** Per-slot (u64 digest, u32 entries, u32 0) into digest_ptr(); returns the slot count. */
  index_digest(): number;
  digest_ptr(): number;
  score(n: number, isl: number, weight: number, temperature: number, rand: number): number;
  debug_trap(): void;
  ingest_reserve(inBytes: number, outBytes: number): number;
  ingest_in_ptr(): number;
  ingest_in_cap(): number;
  ingest_out_ptr(): number;
  ingest_result_ptr(): number;
  ingest_decode(n: number, blockSize: number, kvGroup: number, policy: number, seedLo: number, seedHi: number): number;
  ingest_apply(slot: number, nBytes: number): number;
}

/** A NEEDS value (docs/abi.md) from the first block the slot did not hold on: no recency to bound a cache with. */
export const NEED_NEVER = 0xffffffff;

/** ingest_decode statuses besides Status.CORRUPT (assembly/index.ts): the host decoder takes the batch. */
export const IngestStatus = {
  FALLBACK: -21,
  FULL: -22,
} as const;

/** ingest_decode policy flags (assembly/events/engine-batch.ts P_*). */
export const IngestPolicyFlag = {
  indexDevice: 1,
  dropForeignExtraKeys: 2,
} as const;

export const EXPORT_NAMES: readonly (keyof CoreExports)[] = [
  "memory", "init", "grow_prompt", "abi_version", "tokens_ptr", "tokens_cap", "local_ptr", "seq_ptr", "needs_ptr", "blocks_cap",
  "mm_ptr", "mm_cap", "out_ptr", "sizes_ptr", "counters_ptr", "events_ptr", "events_cap", "io_ptr", "io_cap", "score_ptr",
  "result_ptr", "last_blocks", "memory_used", "entries", "nodes", "ttl_entries", "heap_items", "hash_bytes",
  "hash_prompt", "find_matches", "route", "slot_open", "slot_close", "clear_slot", "store_blocks", "remove_blocks",
  "apply_events", "record_route", "slot_clock", "expire", "slot_capacity", "match_jump", "memo_init", "dump_cap", "dump_entries", "load_entries", "index_digest", "digest_ptr", "score", "debug_trap",
  "ingest_reserve", "ingest_in_ptr", "ingest_in_cap", "ingest_out_ptr", "ingest_result_ptr", "ingest_decode", "ingest_apply",
];
