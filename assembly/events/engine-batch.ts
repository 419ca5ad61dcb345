// Decodes a vLLM/SGLang KVEventBatch (msgpack, as published on ZeroMQ) straight from linear memory into kvgate
// binary records, applying the ingest policy on the way: the in-core twin of src/events/batch-reader.ts,
// event-scratch.ts and batch-preparer.ts, so ingestion costs little more than applying the records. The whole batch
// is decoded before anything is applied, so a corrupt one leaves the index untouched. Shapes that need the host
// (LoRA names: their hash seed; EAGLE pairs; media other than GPU/CPU; strings that are not ASCII) stop decoding
// with S_FALLBACK, and the TypeScript decoder handles that batch instead; the two give identical results.
import {
  pos, end, st, cursorReset, fail, peek, arrayLen, mapLen, strLen, readUint, readInt, readFloat, readHash, skip,
  isArrayCode, isMapCode, isStrCode, isAscii, allNil, be64, S_OK, S_FALLBACK, S_CORRUPT,
} from "./msgpack";
import {
  eventKey, tagOf, batchKey, mediumOf, isFullAttention, F_SKIP, F_HASHES, F_PARENT, F_TOKENS, F_BLOCK_SIZE, F_LORA_ID,
  F_MEDIUM, F_LORA_NAME, F_EXTRA_KEYS, F_GROUP, F_SPEC_KIND, F_TYPE, TAG_STORED, TAG_REMOVED, TAG_CLEARED,
  BK_TS, BK_EVENTS, BK_RANK, MEDIUM_GPU, MEDIUM_CPU,
} from "./engine-keys";
import { writerReset, scratchReset, scratch, tokensInPlace, storedTokens, removed, removedOne, cleared } from "./record-writer";
import { matchRemoved, fastHash, fastGroup } from "./removed-fast";
import { readTokens } from "./token-ids";

// Per-batch counters, in the order of BatchDelta (src/events/ingest-counters.ts) as the host reads them.
export const D_STORED: i32 = 0;
export const D_REMOVED: i32 = 1;
export const D_CLEARED: i32 = 2;
export const D_BLOCKS_STORED: i32 = 3;
export const D_BLOCKS_REMOVED: i32 = 4;
export const D_UNKNOWN: i32 = 5;
export const D_DROPPED_BLOCK_SIZE: i32 = 6;
export const D_DROPPED_TOKEN_COUNT: i32 = 7;
export const D_DROPPED_TIER: i32 = 8;
export const D_DROPPED_GROUP: i32 = 9;
export const D_DROPPED_EXTRA_KEYS: i32 = 10;
export const D_DROPPED_LORA: i32 = 11;
export const D_DEVICE: i32 = 12;
export const D_HOST: i32 = 13;
export const DELTAS: i32 = 16;

/** Ingest policy flags (bit set). */
export const P_INDEX_DEVICE: i32 = 1;
export const P_DROP_FOREIGN_EXTRA_KEYS: i32 = 2;

// Policy of the batch being decoded.
let blockSize: u64 = 0;
let kvGroup: i64 = -1;
let flags: i32 = 0;
let seed: u64 = 0;
let delta: usize = 0;
/** Common-shape BlockRemoved events indexed in this batch (their counters are added at the end). */
let fastRemoved: u32 = 0;

// Outcome of the batch.
export let rank: i64 = -1;
export let eventCount: u32 = 0;
export let hasClear = false;

// The event being read (EventScratch's fields).
let tag: i32 = 0;
let seen: u32 = 0;
let hashes: usize = 0;
let nHashes: u32 = 0;
let hasParent = false;
let parent: u64 = 0;
let tokens: usize = 0;
let nTokens: u32 = 0;
let evBlockSize: i64 = -1;
let hasLoraId = false;
let medium: i32 = MEDIUM_GPU;
let notFullAttention = false;
let groupIdx: i64 = -1;
let extraKeysAt: usize = 0;

// @ts-ignore: decorator
@inline function bump(d: i32, n: u32 = 1): void {
  const p = delta + (<usize>d << 2);
  store<u32>(p, load<u32>(p) + n);
}

/**
 * Decodes the batch of `n` bytes at `p` into records. `deltaOut` receives DELTAS u32 counters. Returns S_OK or the
 * status that stopped it; `rank` is -1 when the batch names none.
 */
export function decodeBatch(p: usize, n: usize, bs: u32, group: i32, policy: i32, seedValue: u64, deltaOut: usize): i32 {
  cursorReset(p, n);
  writerReset();
  blockSize = bs;
  kvGroup = group;
  flags = policy;
  seed = seedValue;
  delta = deltaOut;
  memory.fill(delta, 0, <usize>DELTAS << 2);
  rank = -1;
  fastRemoved = 0;
  eventCount = 0;
  hasClear = false;
  let ts: f64 = NaN;
  let sawEvents = false;
  const c = peek();
  if (isArrayCode(c)) {
    const len = arrayLen();
    if (st != S_OK) return st;
    if (len < 2) { fail(S_CORRUPT); return st; }
    ts = readFloat();
    readEvents();
    sawEvents = true;
    if (len >= 3) readRank();
    for (let i: u32 = 3; i < len && st == S_OK; i++) skip();
  } else if (isMapCode(c)) {
    const len = mapLen();
    for (let i: u32 = 0; i < len && st == S_OK; i++) {
      if (!isStrCode(peek())) { skip(); skip(); continue; }
      const kn = strLen();
      if (st != S_OK) break;
      const k = batchKey(pos, kn);
      pos += <usize>kn;
      if (k == BK_TS) ts = readFloat();
      else if (k == BK_EVENTS) { readEvents(); sawEvents = true; }
      else if (k == BK_RANK) readRank();
      else skip();
    }
  } else {
    fail(S_CORRUPT);
  }
  if (st != S_OK) return st;
  if (isNaN(ts) || !sawEvents) { fail(S_CORRUPT); return st; }
  if (pos != end) { fail(S_CORRUPT); return st; }
  bump(D_DEVICE, fastRemoved);
  bump(D_REMOVED, fastRemoved);
  bump(D_BLOCKS_REMOVED, fastRemoved);
  return S_OK;
}

function readRank(): void {
  if (peek() == 0xc0) { pos++; return; }
  const r = readUint();
  if (st == S_OK) rank = <i64>r;
}

function readEvents(): void {
  const n = arrayLen();
  eventCount = n;
  for (let i: u32 = 0; i < n && st == S_OK; i++) {
    if (matchRemoved()) {
      removedPolicy();
      continue;
    }
    readEvent();
    if (st == S_OK) applyPolicy();
  }
}

/** applyPolicy for a BlockRemoved of one hash on the GPU (matchRemoved's shapes). */
function removedPolicy(): void {
  if ((flags & P_INDEX_DEVICE) == 0) { bump(D_DEVICE); bump(D_DROPPED_TIER); return; }
  if (kvGroup >= 0 && fastGroup >= 0 && <i64>fastGroup != kvGroup) { bump(D_DEVICE); bump(D_DROPPED_GROUP); return; }
  // Counted once per batch (device event, removed event, one block each).
  fastRemoved++;
  removedOne(fastHash);
}

function readEvent(): void {
  tag = 0; seen = 0; nHashes = 0; hasParent = false; nTokens = 0; evBlockSize = -1; hasLoraId = false;
  medium = MEDIUM_GPU; notFullAttention = false; groupIdx = -1; extraKeysAt = 0;
  scratchReset();
  const c = peek();
  if (isArrayCode(c)) {
    const n = arrayLen();
    if (st != S_OK) return;
    if (n == 0 || !isStrCode(peek())) { fail(S_CORRUPT); return; }
    const tn = strLen();
    if (st != S_OK) return;
    tag = tagOf(pos, tn);
    pos += <usize>tn;
    for (let i: u32 = 1; i < n && st == S_OK; i++) {
      let f = F_SKIP;
      if (tag == TAG_STORED) f = i <= <u32>F_SPEC_KIND ? <i32>i : F_SKIP;
      else if (tag == TAG_REMOVED) f = i == 1 ? F_HASHES : i == 2 ? F_MEDIUM : i == 3 ? F_GROUP : F_SKIP;
      field(f);
    }
  } else if (isMapCode(c)) {
    const n = mapLen();
    for (let i: u32 = 0; i < n && st == S_OK; i++) {
      if (!isStrCode(peek())) { skip(); skip(); continue; }
      const kn = strLen();
      if (st != S_OK) return;
      const k = eventKey(pos, kn);
      pos += <usize>kn;
      if (k == F_TYPE) {
        if (!isStrCode(peek())) { fail(S_CORRUPT); return; }
        const tn = strLen();
        if (st != S_OK) return;
        tag = tagOf(pos, tn);
        pos += <usize>tn;
      } else {
        field(k);
      }
    }
  } else {
    fail(S_CORRUPT);
  }
  if (st != S_OK) return;
  const required: u32 = tag == TAG_STORED ? (1 << F_HASHES) | (1 << F_TOKENS) : tag == TAG_REMOVED ? 1 << F_HASHES : 0;
  if ((seen & required) != required) { fail(S_CORRUPT); return; }
}

function field(f: i32): void {
  seen |= 1 << <u32>f;
  const nil = peek() == 0xc0;
  switch (f) {
    case F_HASHES: { readHashes(); return; }
    case F_PARENT: {
      if (nil) { pos++; return; }
      parent = readHash();
      hasParent = true;
      return;
    }
    case F_TOKENS: {
      const n = arrayLen();
      if (st != S_OK) return;
      // EAGLE bigrams [(t0,t1),(t1,t2),…] are hashed by the host.
      if (n > 0 && isArrayCode(peek())) { fail(S_FALLBACK); return; }
      // Straight into the record when the hashes came first (msgspec's field order) and it will be one record.
      const at = tag == TAG_STORED && (seen & (1 << F_HASHES)) != 0 ? tokensInPlace(nHashes, n, <u32>blockSize) : 0;
      tokens = at != 0 ? at : scratch((<u64>n + 1) << 2);
      if (st != S_OK) return;
      readTokens(tokens, n);
      nTokens = n;
      return;
    }
    case F_BLOCK_SIZE: { if (nil) pos++; else evBlockSize = <i64>readUint(); return; }
    case F_LORA_ID: { if (nil) pos++; else { readInt(); hasLoraId = true; } return; }
    case F_MEDIUM: {
      if (nil) { pos++; medium = MEDIUM_GPU; return; }
      const n = strLen();
      if (st != S_OK) return;
      const m = mediumOf(pos, n);
      // Other media (disk, external, mixed case) map to tiers by the host's rules.
      if (m < 0) { fail(S_FALLBACK); return; }
      medium = m;
      pos += <usize>n;
      return;
    }
    case F_LORA_NAME: {
      if (nil) { pos++; return; }
      strLen();
      // A LoRA name seeds the block hashes; the host derives that seed.
      if (st == S_OK) fail(S_FALLBACK);
      return;
    }
    case F_EXTRA_KEYS: {
      extraKeysAt = 0;
      if (nil) { pos++; return; }
      // vLLM sends one nil per block when there are no LoRA, multimodal or salt keys: nothing foreign to look for
      // later, and the nils are passed eight at a time.
      if (isArrayCode(peek())) {
        const at = pos;
        const n = arrayLen();
        if (st != S_OK) return;
        if (allNil(pos, n)) { pos += <usize>n; return; }
        pos = at;
      }
      extraKeysAt = pos;
      skip();
      return;
    }
    case F_GROUP: { if (nil) pos++; else groupIdx = readInt(); return; }
    case F_SPEC_KIND: {
      if (nil) { pos++; notFullAttention = false; return; }
      const n = strLen();
      if (st != S_OK) return;
      const full = isFullAttention(pos, n);
      if (!full && !isAscii(pos, n)) { fail(S_FALLBACK); return; }
      notFullAttention = !full;
      pos += <usize>n;
      return;
    }
  }
  skip();
}

function readHashes(): void {
  const n = arrayLen();
  if (st != S_OK) return;
  const h = scratch(<u64>n << 3);
  if (st != S_OK) return;
  for (let i: u32 = 0; i < n; i++) {
    const p = pos;
    // uint64, vLLM's usual form, inline; every other form through the checked reader.
    if (end - p >= 9 && load<u8>(p) == 0xcf) {
      store<u64>(h + (<usize>i << 3), be64(p + 1));
      pos = p + 9;
    } else {
      store<u64>(h + (<usize>i << 3), readHash());
      if (st != S_OK) return;
    }
  }
  hashes = h;
  nHashes = n;
}

/**
 * Whether some block's extra_keys hold more than a LoRA name. With no lora_name (LoRA events are the host's), any
 * string there is foreign; the host decodes strings it compares, so a non-ASCII one goes to the host.
 */
function foreignExtraKeys(): bool {
  const back = pos;
  pos = extraKeysAt;
  let foreign = false;
  const c = peek();
  if (c == 0xc0) { pos = back; return false; }
  if (!isArrayCode(c)) { pos = back; return true; }
  const n = arrayLen();
  for (let i: u32 = 0; i < n && !foreign; i++) {
    const e = peek();
    if (e == 0xc0) { pos++; continue; }
    if (!isArrayCode(e)) { foreign = true; break; }
    if (arrayLen() == 0) continue;
    if (isStrCode(peek())) {
      const sn = strLen();
      if (!isAscii(pos, sn)) fail(S_FALLBACK);
    }
    foreign = true;
  }
  if (st == S_OK) pos = back;
  return foreign;
}

/** BatchPreparer's per-event rules: counters, filters, then the record. */
function applyPolicy(): void {
  const foreign = extraKeysAt != 0 && foreignExtraKeys();
  if (st != S_OK) return;
  if (tag == TAG_CLEARED) {
    bump(D_CLEARED);
    cleared();
    hasClear = true;
    return;
  }
  if (tag != TAG_STORED && tag != TAG_REMOVED) { bump(D_UNKNOWN); return; }
  if (medium == MEDIUM_GPU) {
    bump(D_DEVICE);
    if ((flags & P_INDEX_DEVICE) == 0) { bump(D_DROPPED_TIER); return; }
  } else {
    // MEDIUM_CPU: the host tier, which is counted and never indexed.
    bump(D_HOST);
    bump(D_DROPPED_TIER);
    return;
  }
  if (notFullAttention || (kvGroup >= 0 && groupIdx >= 0 && groupIdx != kvGroup)) { bump(D_DROPPED_GROUP); return; }
  const n = nHashes;
  if (tag == TAG_REMOVED) {
    bump(D_REMOVED);
    bump(D_BLOCKS_REMOVED, n);
    removed(hashes, n);
    return;
  }
  const t = <u64>nTokens;
  const bs: i64 = evBlockSize >= 0 ? evBlockSize : n > 0 && t % <u64>n == 0 ? <i64>(t / <u64>n) : -1;
  if (bs != <i64>blockSize) { bump(D_DROPPED_BLOCK_SIZE); return; }
  if (t != <u64>n * <u64>bs) { bump(D_DROPPED_TOKEN_COUNT); return; }
  if (hasLoraId) { bump(D_DROPPED_LORA); return; }
  // Extra keys may hold a root event's cache_salt, which salts the first block's hash: the host reads them.
  if (foreign) { fail(S_FALLBACK); return; }
  bump(D_STORED);
  bump(D_BLOCKS_STORED, n);
  if (n == 0) return;
  storedTokens(hasParent, parent, hashes, n, tokens, <u32>bs, seed);
}
