// The block index: Stored/Removed/Cleared events and approximate-mode routing decisions per worker slot, with TTL,
// pruning and capacity eviction. A node is a prompt prefix (its router sequence hash); entries map engine hashes to nodes.
import { xxh3Pair } from "../hash/xxh3";
import { CHAIN_SEED } from "../hash/prompt";
import { nodeSetBit, nodeClearBit, nodeHome, nodeAfterHome } from "./node-table";
import { touch, settle, TOUCH_RUN } from "./touch";
import {
  entryFind, entryProbe, entryFill, entryInsert, entryDeleteAt, entryHome, entryAfterHome, freeEntries, liveEntries, recAt, tableCount, isLive,
  R_HASH, R_SEQ, R_SLOT, R_FLAGS, R_DEPTH, R_TTL, F_ALIAS,
} from "./entry-table";
import { ttlFree, ttlRec, ttlCount, T_SLOT, T_HASH } from "./ttl-store";
import { heapLen, heapPeekLive, heapPop, heapTopExpiry, heapTop, I_SLOT, I_HASH, I_ID } from "./ttl-heap";
import { lruSetCapacity, lruLink } from "./ttl-lru";
import {
  OK, E_BAD_SLOT, E_CAPACITY, E_PARENT_NOT_FOUND, E_INVALID_SEQUENCE,
  C_APPLIED, C_PARENT_MISSING, C_INVALID, C_CAPACITY, C_UNKNOWN_REMOVED, C_BAD_SLOT, C_EVICTED, C_EXPIRED, C_PRUNED,
} from "../abi";

export let maxSlots: i32 = 0;
export let sizes: usize = 0; // u32 per slot: entries held (tree size, the tie-breaker)
let open: usize = 0; // u8 per slot
let aliases: usize = 0; // u32 per slot: alias entries alive
export let counters: usize = 0;
export let approxMax: u32 = 1 << 20;
export let pruneRatio: f64 = 0.8;

export function indexInit(slots: i32, sizesBase: usize, openBase: usize, aliasBase: usize, countersBase: usize): void {
  maxSlots = slots;
  sizes = sizesBase;
  open = openBase;
  aliases = aliasBase;
  counters = countersBase;
}

export function setApprox(max: u32, ratio: f64): void {
  approxMax = max;
  pruneRatio = ratio;
}

// @ts-ignore: decorator
@inline export function count(c: i32, n: u32 = 1): void {
  const p = counters + (<usize>c << 2);
  store<u32>(p, load<u32>(p) + n);
}

// @ts-ignore: decorator
@inline function bump(base: usize, slot: i32, d: i32): void {
  const p = base + (<usize>slot << 2);
  store<i32>(p, load<i32>(p) + d);
}

export function slotOk(slot: i32): bool {
  return slot >= 0 && slot < maxSlots && load<u8>(open + <usize>slot) != 0;
}

export function slotOpen(slot: i32): i32 {
  if (slot < 0 || slot >= maxSlots) return E_BAD_SLOT;
  store<u8>(open + <usize>slot, 1);
  lruSetCapacity(slot, 0);
  return OK;
}

// Duplicate detection for long events: an open-addressing set stamped per call, so it is never cleared.
let dupSet: usize = 0;
let dupMask: u32 = 0;
let dupStamp: u32 = 0;

/** Gives the duplicate check a region of `count` (power of two) 16-byte records. */
export function dupInit(base: usize, count: u32): void {
  dupSet = base;
  dupMask = count - 1;
  dupStamp = 0;
}

function hasDuplicate(blocks: usize, n: i32, hasParent: bool, parent: u64): bool {
  if (hasParent) for (let i = 0; i < n; i++) if (load<u64>(blocks + (<usize>i << 4)) == parent) return true;
  // Short events (the common case: one engine step) are cheaper to check pairwise than to hash.
  if (n <= 24 || <u32>n * 2 > dupMask + 1) {
    for (let i = 1; i < n; i++) {
      const h = load<u64>(blocks + (<usize>i << 4));
      for (let j = 0; j < i; j++) if (load<u64>(blocks + (<usize>j << 4)) == h) return true;
    }
    return false;
  }
  dupStamp++;
  if (dupStamp == 0) {
    memory.fill(dupSet, 0, (<usize>dupMask + 1) << 4);
    dupStamp = 1;
  }
  // Only the first 2n..4n records are used: a set sized to the event stays in cache (the whole region is MiBs).
  const mask = min<u32>(dupMask, (<u32>1 << (32 - clz<u32>(<u32>n * 2 - 1))) - 1);
  for (let i = 0; i < n; i++) {
    const h = load<u64>(blocks + (<usize>i << 4));
    let k = <u32>((h * 0x9E3779B97F4A7C15) >> 40) & mask;
    while (true) {
      const r = dupSet + (<usize>k << 4);
      if (load<u32>(r, 8) != dupStamp) {
        store<u64>(r, h);
        store<u32>(r, dupStamp, 8);
        break;
      }
      if (load<u64>(r) == h) return true;
      k = (k + 1) & mask;
    }
  }
  return false;
}

/** Attaches a new record to its node; a second entry of one slot on one node becomes an alias. */
function attach(r: usize, slot: i32, seq: u64): void {
  if (nodeSetBit(seq, slot)) {
    store<u32>(r, load<u32>(r, R_FLAGS) | F_ALIAS, R_FLAGS);
    bump(aliases, slot, 1);
  }
}

/** Detaches and deletes the record at `r`. When an owner leaves while aliases of its slot exist, an alias on the same node takes over. */
export function drop(r: usize): void {
  const slot = load<i32>(r, R_SLOT);
  const seq = load<u64>(r, R_SEQ);
  const ttl = load<u32>(r, R_TTL);
  if (ttl != 0) ttlFree(ttl - 1);
  const alias = (load<u32>(r, R_FLAGS) & F_ALIAS) != 0;
  bump(sizes, slot, -1);
  entryDeleteAt(r);
  if (alias) bump(aliases, slot, -1);
  else if (!promoteAlias(slot, seq)) nodeClearBit(seq, slot);
}

/** Rare path (an engine naming one prefix twice): scans the table for an alias to hand the slot bit to. */
function promoteAlias(slot: i32, seq: u64): bool {
  if (load<i32>(aliases + (<usize>slot << 2)) == 0) return false;
  const n = tableCount();
  for (let i: u64 = 0; i < n; i++) {
    const r = recAt(i);
    const f = load<u32>(r, R_FLAGS);
    if (isLive(r) && (f & F_ALIAS) != 0 && load<i32>(r, R_SLOT) == slot && load<u64>(r, R_SEQ) == seq) {
      store<u32>(r, f & ~F_ALIAS, R_FLAGS);
      bump(aliases, slot, -1);
      return true;
    }
  }
  return false;
}

/** `create` at the empty record `r` that entryProbe just returned for (slot, hash) (nothing deleted in between). */
export function createAt(r: usize, slot: i32, hash: u64, seq: u64, depth: u32): usize {
  entryFill(r, slot, hash, seq, depth);
  bump(sizes, slot, 1);
  attach(r, slot, seq);
  return r;
}

export function create(slot: i32, hash: u64, seq: u64, depth: u32): usize {
  const r = entryInsert(slot, hash, seq, depth);
  bump(sizes, slot, 1);
  attach(r, slot, seq);
  return r;
}

/** Drops the entry behind the earliest timer (deepest first on ties); false when no timer is left. */
function dropOldest(): bool {
  const id = heapPeekLive();
  if (id < 0) return false;
  heapPop();
  warmNextVictim();
  const t = ttlRec(<u32>id);
  drop(entryFind(load<i32>(t, T_SLOT), load<u64>(t, T_HASH)));
  return true;
}

/**
 * Warms what dropping the new top would read (its timer, link, entry and node, and the records after those two homes
 * a delete shifts back) while this drop runs: evictions of a full approximate index then overlap their misses one
 * victim ahead. A timed entry's engine hash is its sequence hash (recorded decisions), so the node is known from the item.
 */
function warmNextVictim(): void {
  const it = heapTop();
  if (it == 0) return;
  const slot = load<i32>(it, I_SLOT), hash = load<u64>(it, I_HASH), id = load<u32>(it, I_ID);
  settle(touch(ttlRec(id)) ^ touch(lruLink(id)) ^ touch(entryHome(slot, hash)) ^ touch(entryAfterHome(slot, hash)) ^
    touch(nodeHome(hash)) ^ touch(nodeAfterHome(hash)));
}

/** Evicts approximate entries until `need` entries are free. */
export function evictFor(need: u32): void {
  while (freeEntries() < need && dropOldest()) count(C_EVICTED);
}

/**
 * Stored: `n` blocks at `blocks` as (engine hash u64, local hash u64) pairs under an optional parent engine hash.
 * All or nothing: a missing parent, an invalid sequence or a lack of room leaves the index untouched.
 */
export function storeBlocks(slot: i32, hasParent: bool, parent: u64, blocks: usize, n: i32): i32 {
  if (!slotOk(slot)) { count(C_BAD_SLOT); return E_BAD_SLOT; }
  let prev: u64 = 0;
  let depth: u32 = 0;
  if (hasParent) {
    const p = entryFind(slot, parent);
    if (p == 0) { count(C_PARENT_MISSING); return E_PARENT_NOT_FOUND; }
    prev = load<u64>(p, R_SEQ);
    depth = load<u32>(p, R_DEPTH) + 1;
  }
  // A block naming its parent, or two blocks with one hash, is not a sequence.
  if (hasDuplicate(blocks, n, hasParent, parent)) { count(C_INVALID); return E_INVALID_SEQUENCE; }
  if (freeEntries() < <u32>n) {
    evictFor(<u32>n);
    // Evicting may have dropped the parent or blocks this event refreshes, so room is judged on the index as it now is.
    if (hasParent && entryFind(slot, parent) == 0) { count(C_PARENT_MISSING); return E_PARENT_NOT_FOUND; }
    let missing: u32 = 0;
    for (let i = 0; i < n; i++) if (entryFind(slot, load<u64>(blocks + (<usize>i << 4))) == 0) missing++;
    if (freeEntries() < missing) { count(C_CAPACITY); return E_CAPACITY; }
  }
  for (let i0 = 0; i0 < n; i0 += TOUCH_RUN) {
    const m = min(TOUCH_RUN, n - i0);
    // Chain the run's sequence hashes first and warm the records they and the engine hashes land on.
    for (let j = 0; j < m; j++) {
      const localHash = load<u64>(blocks + (<usize>(i0 + j) << 4), 8);
      const seq = !hasParent && i0 + j == 0 ? localHash : xxh3Pair(prev, localHash, CHAIN_SEED);
      prev = seq;
      store<u64>(runSeqs + (<usize>j << 3), seq);
    }
    let warm: u64 = 0;
    for (let j = 0; j < m; j++) {
      warm ^= touch(entryHome(slot, load<u64>(blocks + (<usize>(i0 + j) << 4)))) ^ touch(nodeHome(load<u64>(runSeqs + (<usize>j << 3))));
    }
    settle(warm);
    for (let j = 0; j < m; j++) storeOne(slot, blocks + (<usize>(i0 + j) << 4), load<u64>(runSeqs + (<usize>j << 3)), depth + <u32>(i0 + j));
  }
  count(C_APPLIED);
  return OK;
}

const runSeqs: usize = memory.data(TOUCH_RUN * 8, 8);

/** One block of a Stored event: a new entry, a refresh of the same prefix, or a re-parented hash. */
// @ts-ignore: decorator
@inline function storeOne(slot: i32, b: usize, seq: u64, d: u32): void {
  const hash = load<u64>(b);
  {
    const r = entryProbe(slot, hash);
    if (!isLive(r)) {
      entryFill(r, slot, hash, seq, d);
      bump(sizes, slot, 1);
      attach(r, slot, seq);
      return;
    }
    if (load<u64>(r, R_SEQ) == seq) {
      const ttl = load<u32>(r, R_TTL);
      if (ttl != 0) {
        // An engine event confirms a predicted block: it is no longer subject to TTL.
        ttlFree(ttl - 1);
        store<u32>(r, 0, R_TTL);
      }
      store<u32>(r, d, R_DEPTH);
      return;
    }
    drop(r);
    create(slot, hash, seq, d);
  }
}

/** Removed: engine hashes of one slot. Unknown hashes are counted and skipped; removal never cascades. */
export function removeBlocks(slot: i32, hashes: usize, n: i32): i32 {
  if (!slotOk(slot)) { count(C_BAD_SLOT); return E_BAD_SLOT; }
  let unknown: u32 = 0;
  for (let i0 = 0; i0 < n; i0 += TOUCH_RUN) {
    const m = min(TOUCH_RUN, n - i0);
    const at = hashes + (<usize>i0 << 3);
    // Warm the run's entries, then the nodes they name, then drop (records move on delete, so look up again). Each
    // delete shifts back the record after it, so that record's line is warmed too.
    let warm: u64 = 0;
    for (let j = 0; j < m; j++) {
      const h = load<u64>(at + (<usize>j << 3));
      warm ^= touch(entryHome(slot, h)) ^ touch(entryAfterHome(slot, h));
    }
    for (let j = 0; j < m; j++) {
      const r = entryFind(slot, load<u64>(at + (<usize>j << 3)));
      if (r != 0) {
        const seq = load<u64>(r, R_SEQ);
        warm ^= touch(nodeHome(seq)) ^ touch(nodeAfterHome(seq));
      }
    }
    settle(warm);
    for (let j = 0; j < m; j++) {
      const r = entryFind(slot, load<u64>(at + (<usize>j << 3)));
      if (r == 0) unknown++;
      else drop(r);
    }
  }
  if (unknown > 0) count(C_UNKNOWN_REMOVED, unknown);
  count(C_APPLIED);
  return <i32>unknown;
}

/**
 * Cleared: every block of one slot; the slot stays open. Scans the table (Cleared and worker removal are rare,
 * and no per-slot list has to be kept up to date on the hot path). A delete can shift a later record into the
 * current position, so a position is examined again after each delete.
 */
export function clearSlot(slot: i32): i32 {
  if (!slotOk(slot)) { count(C_BAD_SLOT); return E_BAD_SLOT; }
  const n = tableCount();
  let i: u64 = 0;
  while (i < n && load<u32>(sizes + (<usize>slot << 2)) > 0) {
    const r = recAt(i);
    if (isLive(r) && load<i32>(r, R_SLOT) == slot) drop(r);
    else i++;
  }
  count(C_APPLIED);
  return OK;
}

export function slotClose(slot: i32): i32 {
  const r = clearSlot(slot);
  if (r < 0) return r;
  store<u8>(open + <usize>slot, 0);
  lruSetCapacity(slot, 0);
  return OK;
}

/** Drops every approximate entry whose expiry is at or before `now`; returns how many. */
export function expire(now: f64): i32 {
  let n = 0;
  // Every live timer's item sorts no later than the timer (ttl-heap.ts), so a top item due after `now` means no timer
  // is due: checked first, a timer refreshed since its item was pushed is re-keyed (a sift) once its old expiry has
  // passed, not on the next call after every refresh.
  while (heapLen > 0 && heapTopExpiry() <= now && heapPeekLive() >= 0 && heapTopExpiry() <= now && dropOldest()) n++;
  if (n > 0) count(C_EXPIRED, <u32>n);
  return n;
}

export function prune(): void {
  if (ttlCount <= approxMax) return;
  const target = <u32>Math.floor(<f64>approxMax * pruneRatio);
  let n: u32 = 0;
  while (ttlCount > target && dropOldest()) n++;
  count(C_PRUNED, n);
}

export function totalEntries(): u32 {
  return liveEntries;
}
