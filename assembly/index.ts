// The only export surface of the WASM core: numbers in, numbers out; bulk data through fixed regions.
// Regions are reserved once by `init` (and by `grow_prompt`), so JS views only go stale on those two calls.
import { ABI_VERSION, OK, E_STATE, E_NO_MEMORY, E_BAD_ARG, E_CORRUPT, COUNTERS } from "./abi";
import { setBudget, reserve, used } from "./memory";
import { xxh3 } from "./hash/xxh3";
import { hashPrompt, MAX_BLOCK_SIZE } from "./hash/prompt";
import { memoInit } from "./hash/prompt-memo";
import { nodeInit, nodeBytes, liveNodes } from "./index/node-table";
import { entryInit, RECORD_BYTES } from "./index/entry-table";
import { ttlInit, ttlCount } from "./index/ttl-store";
import { heapInit, heapLen } from "./index/ttl-heap";
import { lruInit, lruClock } from "./index/ttl-lru";
import {
  indexInit, dupInit, setApprox, slotOpen as openSlot, slotClose as closeSlot, clearSlot, storeBlocks, removeBlocks, expire as expireAt,
  totalEntries, sizes,
} from "./index/block-index";
import { findMatches, setJump, MAX_JUMP } from "./index/find-matches";
import { record, setSlotCapacity, needsRegion, setNeedsRegion } from "./index/approx-record";
import { dumpEntries, loadEntries } from "./index/entry-dump";
import { digestSlots } from "./index/index-digest";
import { scoreInit, scoreBytes, score as scoreKernel } from "./score/cost";
import { applyBatch, corruptAt } from "./events/event-batch";
import { decodeBatch, rank as batchRank, eventCount, hasClear, DELTAS } from "./events/engine-batch";
import { writerInit, writtenBytes, records as batchRecords, setSlots } from "./events/record-writer";
import { S_OK, S_FALLBACK, S_CORRUPT } from "./events/msgpack";

let ready = false;
let slots = 0;
let tokens: usize = 0, tokenCap = 0;
let local: usize = 0, seq: usize = 0, blockCap = 0;
let mm: usize = 0, mmCap = 0, mmScratch: usize = 0;
let out: usize = 0, active: usize = 0;
let counters: usize = 0, events: usize = 0, eventCap = 0;
let io: usize = 0, ioCap = 0, scoreRegion: usize = 0, result: usize = 0;
let lastBlocks = 0;
let digest: usize = 0;

function pow2AtLeast(n: u64): u64 {
  let p: u64 = 16;
  while (p < n) p <<= 1;
  return p;
}

/**
 * Reserves every region. `capacity` bounds (slot, block) entries; tables are sized so their load stays ≤ 0.75.
 * Returns OK or a negative status; may be called once per instance.
 */
export function init(
  maxSlots: i32, capacity: i32, maxTokens: i32, maxBlocks: i32, eventBytes: i32, maxMm: i32,
  approxMax: i32, pruneRatio: f64, saltLo: i32, saltHi: i32, budgetPages: i32,
): i32 {
  if (ready) return E_STATE;
  if (maxSlots <= 0 || maxSlots > 4096 || capacity <= 0 || maxTokens < 0 || maxBlocks <= 0 || eventBytes < 16 ||
      maxMm < 0 || approxMax <= 0 || !(pruneRatio > 0 && pruneRatio <= 1)) return E_BAD_ARG;
  setBudget(budgetPages);
  const words = (maxSlots + 63) >> 6;
  const cap = <u64>capacity;
  const tableCount = pow2AtLeast((cap * 4 + 2) / 3);
  // Pruning runs as soon as the TTL population passes approxMax, so live timers never exceed approxMax + 1;
  // timers and heap items share that bound.
  const heapCap = <u32>min<u64>(cap, <u64>approxMax + 1) + 64;
  const salt = (<u64><u32>saltHi << 32) | <u64><u32>saltLo;
  const nodes = reserve(nodeBytes(tableCount, words));
  const entryTable = reserve(<usize>tableCount * RECORD_BYTES);
  const timers = reserve(<usize>heapCap << 5);
  const heap = reserve((<usize>heapCap << 5) + 64);
  const lruLinks = reserve(<usize>heapCap << 4), lruLists = reserve(<usize>maxSlots << 4), lruClocks = reserve(<usize>maxSlots << 2);
  const perSlot = <usize>maxSlots << 2;
  const sizesR = reserve(perSlot), aliasR = reserve(perSlot), openR = reserve(<usize>maxSlots);
  counters = reserve(<usize>COUNTERS << 2);
  out = reserve(<usize>maxSlots << 3);
  active = reserve(<usize>words << 3);
  events = reserve(<usize>eventBytes);
  io = reserve(<usize>maxBlocks * 24);
  ioCap = maxBlocks;
  scoreRegion = reserve(scoreBytes(maxSlots));
  result = reserve(16);
  mm = reserve(<usize>maxMm << 4);
  digest = reserve(<usize>maxSlots << 4);
  // Longest Stored event: a whole batch of pairs, or an IO region's worth; the set keeps its load at or under 1/2.
  const dupCount = <u32>pow2AtLeast(<u64>max<i32>(eventBytes >> 4, maxBlocks) * 2);
  const dupR = reserve(<usize>dupCount << 4);
  mmScratch = reserve((<usize>MAX_BLOCK_SIZE + 1) * 4 + (<usize>maxMm << 3));
  if (nodes == 0 || entryTable == 0 || timers == 0 || heap == 0 || lruLinks == 0 || lruLists == 0 || lruClocks == 0 ||
      sizesR == 0 || aliasR == 0 ||
      openR == 0 || counters == 0 || out == 0 || active == 0 || events == 0 || io == 0 || scoreRegion == 0 ||
      result == 0 || mm == 0 || digest == 0 || mmScratch == 0 || dupR == 0) return E_NO_MEMORY;
  nodeInit(nodes, tableCount, words, salt ^ 0x9E3779B97F4A7C15);
  entryInit(entryTable, tableCount, <u32>capacity, (salt * 0xBF58476D1CE4E5B9) ^ 0x94D049BB133111EB);
  ttlInit(timers, heapCap);
  heapInit(heap, heapCap);
  lruInit(lruLinks, lruLists, lruClocks, maxSlots);
  indexInit(maxSlots, sizesR, openR, aliasR, counters);
  dupInit(dupR, dupCount);
  setApprox(<u32>approxMax, pruneRatio);
  scoreInit(scoreRegion, maxSlots);
  slots = maxSlots;
  eventCap = eventBytes;
  mmCap = maxMm;
  ready = true;
  return growPrompt(maxTokens, maxBlocks);
}

function growPrompt(maxTokens: i32, maxBlocks: i32): i32 {
  if (maxTokens > tokenCap) {
    const t = reserve(<usize>maxTokens << 2);
    if (t == 0) return E_NO_MEMORY;
    tokens = t;
    tokenCap = maxTokens;
  }
  if (maxBlocks > blockCap) {
    const l = reserve(<usize>maxBlocks << 3), s = reserve(<usize>maxBlocks << 3), nd = reserve(<usize>maxBlocks << 2);
    if (l == 0 || s == 0 || nd == 0) return E_NO_MEMORY;
    local = l;
    seq = s;
    setNeedsRegion(nd);
    blockCap = maxBlocks;
  }
  return OK;
}

/** Enlarges the prompt regions (old ones are abandoned: growth is rare and bounded by the page budget). */
export function grow_prompt(maxTokens: i32, maxBlocks: i32): i32 {
  if (!ready) return E_STATE;
  return growPrompt(maxTokens, maxBlocks);
}

export function abi_version(): i32 { return ABI_VERSION; }
export function tokens_ptr(): usize { return tokens; }
export function tokens_cap(): i32 { return tokenCap; }
export function local_ptr(): usize { return local; }
export function seq_ptr(): usize { return seq; }
/** u32 per block of the last record_route: touches since blocks 0..i were last touched (approx-record.ts). */
export function needs_ptr(): usize { return needsRegion(); }
export function blocks_cap(): i32 { return blockCap; }
export function mm_ptr(): usize { return mm; }
export function mm_cap(): i32 { return mmCap; }
export function out_ptr(): usize { return out; }
export function sizes_ptr(): usize { return sizes; }
export function counters_ptr(): usize { return counters; }
export function events_ptr(): usize { return events; }
export function events_cap(): i32 { return eventCap; }
export function io_ptr(): usize { return io; }
export function io_cap(): i32 { return ioCap; }
export function score_ptr(): usize { return scoreRegion; }
export function result_ptr(): usize { return result; }
export function last_blocks(): i32 { return lastBlocks; }
export function memory_used(): usize { return used(); }
export function entries(): u32 { return totalEntries(); }
export function nodes(): i32 { return liveNodes; }
export function ttl_entries(): u32 { return ttlCount; }
export function heap_items(): u32 { return heapLen; }

/** XXH3-64 of the first `n` bytes of EVENTS with a seed given as two halves; the u64 lands in RESULT. */
export function hash_bytes(n: i32, seedLo: i32, seedHi: i32): i32 {
  if (!ready) return E_STATE;
  if (n < 0 || n > eventCap) return E_BAD_ARG;
  store<u64>(result, xxh3(events, <usize>n, (<u64><u32>seedHi << 32) | <u64><u32>seedLo));
  return OK;
}

export function hash_prompt(nTokens: i32, blockSize: i32, seedLo: i32, seedHi: i32, flags: i32, nMm: i32): i32 {
  if (!ready) return E_STATE;
  if (nTokens > tokenCap || nMm > mmCap) return E_BAD_ARG;
  const n = hashPrompt(tokens, nTokens, blockSize, (<u64><u32>seedHi << 32) | <u64><u32>seedLo, flags,
    mm, nMm, mmScratch, local, seq, blockCap);
  lastBlocks = n < 0 ? 0 : n;
  return n;
}

/**
 * Turns on the prompt memo: `count` recent prompts (at most 4,096) over a ring of `bytes`, so prompts that repeat or
 * extend one reuse its block hashes (see hash/prompt-memo.ts). Optional; once per instance, after `init`.
 */
export function memo_init(count: i32, bytes: i32): i32 {
  return ready ? memoInit(count, bytes, counters) : E_STATE;
}

/** Matches the first `nBlocks` sequence hashes of SEQ; (slot, depth) pairs land in OUT. */
export function find_matches(nBlocks: i32): i32 {
  if (!ready) return E_STATE;
  if (nBlocks < 0 || nBlocks > blockCap) return E_BAD_ARG;
  return findMatches(seq, nBlocks, out, active);
}

/**
 * Blocks find_matches may skip while every matched slot still holds the block past them (1, the default, probes
 * every block). Exact for slots whose blocks are prefix-closed; a slot with a hole inside a skipped run is matched past it.
 */
export function match_jump(j: i32): i32 {
  if (j < 1 || j > MAX_JUMP) return E_BAD_ARG;
  setJump(j);
  return OK;
}

/** hash_prompt + find_matches in one crossing. */
export function route(nTokens: i32, blockSize: i32, seedLo: i32, seedHi: i32, flags: i32, nMm: i32): i32 {
  const n = hash_prompt(nTokens, blockSize, seedLo, seedHi, flags, nMm);
  if (n < 0) return n;
  return findMatches(seq, n, out, active);
}

export function slot_open(slot: i32): i32 { return ready ? openSlot(slot) : E_STATE; }
export function slot_close(slot: i32): i32 { return ready ? closeSlot(slot) : E_STATE; }
export function clear_slot(slot: i32): i32 { return ready ? clearSlot(slot) : E_STATE; }

/** Stored event: `n` (engine hash, local hash) pairs in IO. */
export function store_blocks(slot: i32, hasParent: i32, parentLo: i32, parentHi: i32, n: i32): i32 {
  if (!ready) return E_STATE;
  if (n < 0 || n > ioCap) return E_BAD_ARG;
  return storeBlocks(slot, hasParent != 0, (<u64><u32>parentHi << 32) | <u64><u32>parentLo, io, n);
}

/** Removed event: `n` engine hashes in IO. Returns how many were unknown. */
export function remove_blocks(slot: i32, n: i32): i32 {
  if (!ready) return E_STATE;
  if (n < 0 || n > ioCap * 2) return E_BAD_ARG;
  return removeBlocks(slot, io, n);
}

/** A batch of binary event records in EVENTS; on E_CORRUPT, RESULT holds the bad record's byte offset. */
export function apply_events(nBytes: i32): i32 {
  if (!ready) return E_STATE;
  if (nBytes < 0 || nBytes > eventCap) return E_BAD_ARG;
  const r = applyBatch(events, <usize>nBytes, io, ioCap);
  if (r < 0) store<u64>(result, <u64>corruptAt);
  return r;
}

// Engine batch ingest: a vLLM/SGLang msgpack KVEventBatch in INGEST_IN is decoded in the core into binary records in
// INGEST_OUT (see assembly/events/engine-batch.ts), then applied with a slot the host resolves from the batch's rank.
let ingestIn: usize = 0, ingestInCap = 0, ingestOut: usize = 0, ingestOutCap = 0, ingestResult: usize = 0;

/** ingest_decode: a batch shape the host decoder handles instead (LoRA names, EAGLE pairs, other media). */
export const E_INGEST_FALLBACK: i32 = -21;
/** ingest_decode: the records would not fit INGEST_OUT; the host decoder handles the batch. */
export const E_INGEST_FULL: i32 = -22;

/** Reserves the ingest regions (again after growth: old ones are abandoned). */
export function ingest_reserve(inBytes: i32, outBytes: i32): i32 {
  if (!ready) return E_STATE;
  if (inBytes <= 0 || outBytes < 64) return E_BAD_ARG;
  const i = reserve(<usize>inBytes), o = reserve(<usize>outBytes), r = reserve(8 + 16 + (<usize>DELTAS << 2));
  if (i == 0 || o == 0 || r == 0) return E_NO_MEMORY;
  ingestIn = i;
  ingestInCap = inBytes;
  ingestOut = o;
  ingestOutCap = outBytes;
  ingestResult = r;
  writerInit(o, <usize>outBytes, eventCap, ioCap);
  return OK;
}

export function ingest_in_ptr(): usize { return ingestIn; }
export function ingest_in_cap(): i32 { return ingestInCap; }
export function ingest_out_ptr(): usize { return ingestOut; }
export function ingest_result_ptr(): usize { return ingestResult; }

/**
 * Decodes the `n`-byte batch in INGEST_IN under the ingest policy (worker block size, KV group or -1, flags, local
 * hash seed). RESULT: f64 rank (-1: none), u32 events, records, bytes, clears, then the per-batch counters. Returns
 * records written, E_CORRUPT, E_INGEST_FALLBACK or E_INGEST_FULL; nothing is applied.
 */
export function ingest_decode(n: i32, blockSize: i32, kvGroup: i32, policy: i32, seedLo: i32, seedHi: i32): i32 {
  if (!ready || ingestIn == 0) return E_STATE;
  if (n < 0 || n > ingestInCap || blockSize <= 0) return E_BAD_ARG;
  const s = decodeBatch(ingestIn, <usize>n, <u32>blockSize, kvGroup, policy,
    (<u64><u32>seedHi << 32) | <u64><u32>seedLo, ingestResult + 24);
  if (s != S_OK) return s == S_CORRUPT ? E_CORRUPT : s == S_FALLBACK ? E_INGEST_FALLBACK : E_INGEST_FULL;
  store<f64>(ingestResult, <f64>batchRank);
  store<u32>(ingestResult, eventCount, 8);
  store<u32>(ingestResult, batchRecords, 12);
  store<u32>(ingestResult, <u32>writtenBytes(), 16);
  store<u32>(ingestResult, hasClear ? 1 : 0, 20);
  return <i32>batchRecords;
}

/** Applies the first `nBytes` of INGEST_OUT (a decoded batch) to `slot`; returns records applied or E_CORRUPT. */
export function ingest_apply(slot: i32, nBytes: i32): i32 {
  if (!ready || ingestOut == 0) return E_STATE;
  if (nBytes < 0 || nBytes > ingestOutCap) return E_BAD_ARG;
  setSlots(ingestOut, <usize>nBytes, slot);
  const r = applyBatch(ingestOut, <usize>nBytes, io, ioCap);
  if (r < 0) store<u64>(result, <u64>corruptAt);
  return r;
}

/** Approximate mode: the first `nBlocks` hashes of SEQ were routed to `slot` at `now` ms; they live `ttl` ms. */
export function record_route(slot: i32, nBlocks: i32, now: f64, ttl: f64): i32 {
  if (!ready) return E_STATE;
  if (nBlocks < 0 || nBlocks > blockCap || !(ttl > 0)) return E_BAD_ARG;
  return record(slot, seq, nBlocks, now, ttl);
}

export function expire(now: f64): i32 { return ready ? expireAt(now) : E_STATE; }

/** `slot`'s recency clock: blocks touched by prompts routed to it (wrapping u32; an unknown slot reads 0). */
export function slot_clock(slot: i32): u32 { return ready && slot >= 0 && slot < slots ? lruClock(slot) : 0; }

/** Approximate mode: `slot` keeps at most `capacity` routed blocks, least recent dropped first (0 = TTLs only). */
export function slot_capacity(slot: i32, capacity: i32): i32 {
  if (!ready) return E_STATE;
  if (capacity < 0) return E_BAD_ARG;
  return setSlotCapacity(slot, <u32>capacity);
}

/** Entries IO holds as 32-byte snapshot records (see assembly/index/entry-dump.ts). */
export function dump_cap(): i32 { return ready ? <i32>((<usize>ioCap * 24) >> 5) : 0; }

/**
 * Snapshot: up to `max` entries from table position `cursor` on, as records into IO (TTLs as time left at `now`).
 * Returns records written; RESULT holds the position to continue from (u64), the table size when done.
 */
export function dump_entries(cursor: i32, max: i32, now: f64): i32 {
  if (!ready) return E_STATE;
  if (cursor < 0 || max < 0 || max > dump_cap()) return E_BAD_ARG;
  return <i32>dumpEntries(<u64>cursor, <u32>max, now, io, result);
}

/** Loads `n` snapshot records from IO (slots mapped to open slots); TTLs restart from `now`. Returns entries inserted. */
export function load_entries(n: i32, now: f64): i32 {
  if (!ready) return E_STATE;
  if (n < 0 || n > dump_cap()) return E_BAD_ARG;
  return <i32>loadEntries(io, <u32>n, now);
}
/** Per-slot digest of the entries into DIGEST (16 bytes per slot, see index/index-digest.ts); returns the slot count. */
export function index_digest(): i32 {
  if (!ready) return E_STATE;
  digestSlots(digest, slots);
  return slots;
}

export function digest_ptr(): usize { return digest; }

export function score(n: i32, isl: f64, weight: f64, temperature: f64, rand: f64): i32 {
  if (!ready) return E_STATE;
  if (n < 0 || n > slots) return E_BAD_ARG;
  return scoreKernel(n, isl, weight, temperature, rand);
}

/** Fault injection for the trap-recovery path; never called in production. */
export function debug_trap(): void {
  unreachable();
}
