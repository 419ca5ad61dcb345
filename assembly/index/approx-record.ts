// Approximate mode's writes: a routed prompt recorded on its slot with a sliding TTL, in the recency order an
// engine's LRU keeps, and the slot's capacity (learnt by the closed loop) enforced least recent first.
import { entryFind, entryHome, freeEntries, R_SEQ, R_TTL, R_DEPTH } from "./entry-table";
import { nodeHome } from "./node-table";
import { touch, settle } from "./touch";
import { ttlAlloc, ttlRefresh, ttlRec, T_HASH } from "./ttl-store";
import { heapPush } from "./ttl-heap";
import { lruTouch, lruOldest, lruCount, lruCapacity, lruSetCapacity, lruAge } from "./ttl-lru";
import { count, create, drop, evictFor, expire, prune, slotOk } from "./block-index";
import { E_BAD_SLOT, C_BAD_SLOT, C_CAPACITY, C_CAPPED } from "../abi";

/** Where `record` writes each block's need (see below); set by the prompt regions (assembly/index.ts). */
let needs: usize = 0;

export function setNeedsRegion(base: usize): void {
  needs = base;
}

export function needsRegion(): usize {
  return needs;
}

// @ts-ignore: decorator
@inline const NEVER: u32 = 0xFFFFFFFF;

/**
 * Approximate mode: records that the prompt with these hashes was routed to `slot`, each block living `ttl` ms
 * from `now` (sliding). Blocks an engine event already confirmed keep no TTL. Returns blocks recorded.
 *
 * Writes, per block i, the slot's touches since the least recently touched of blocks 0..i was last touched before this
 * call (0 for blocks an event confirmed, NEVER from the first block the slot did not hold): an LRU cache that still
 * held blocks 0..i for this prompt is larger than that many blocks' worth of the prompts routed to it, so a prefix
 * the engine reports shorter bounds its cache from above (the closed loop, capacity-learner.ts).
 */
export function record(slot: i32, seqs: usize, n: i32, now: f64, ttl: f64): i32 {
  if (!slotOk(slot)) { count(C_BAD_SLOT); return E_BAD_SLOT; }
  expire(now);
  warmPrompt(slot, seqs, n);
  const until = now + ttl;
  let done = 0;
  let need: u32 = 0;
  for (let i = 0; i < n; i++) {
    const seq = load<u64>(seqs + (<usize>i << 3));
    let r = entryFind(slot, seq);
    if (r != 0 && load<u64>(r, R_SEQ) != seq) {
      drop(r);
      r = 0;
    }
    const t = r != 0 ? load<u32>(r, R_TTL) : 0;
    if (r == 0) need = NEVER;
    else if (t != 0) need = max(need, lruAge(slot, t - 1));
    store<u32>(needs + (<usize>i << 2), need);
    if (r != 0) {
      if (t != 0) {
        store<u32>(r, <u32>i, R_DEPTH);
        if (ttlRefresh(t - 1, <u32>i, until)) heapPush(t - 1);
      }
      done++;
      continue;
    }
    if (freeEntries() == 0) evictFor(1);
    if (freeEntries() == 0) {
      count(C_CAPACITY);
      for (let j = i + 1; j < n; j++) store<u32>(needs + (<usize>j << 2), NEVER);
      break;
    }
    const id = ttlAlloc(slot, seq, <u32>i, until);
    // Timers are sized to approxMax + 1 and pruning keeps them there; running out is a bug, so trap and rebuild.
    if (id < 0) unreachable();
    const e = create(slot, seq, seq, <u32>i);
    store<u32>(e, <u32>id + 1, R_TTL);
    heapPush(<u32>id);
    done++;
    prune();
  }
  // Recency as an engine's LRU sees a finished request: its first block most recent, its deepest evicted first.
  for (let i = n - 1; i >= 0; i--) {
    const seq = load<u64>(seqs + (<usize>i << 3));
    const r = entryFind(slot, seq);
    if (r == 0 || load<u64>(r, R_SEQ) != seq) continue;
    const t = load<u32>(r, R_TTL);
    if (t != 0) lruTouch(slot, t - 1);
  }
  enforceCapacity(slot);
  return done;
}

/**
 * Touches every block's entry and node home before the loop that reads and writes them, so a prompt's misses
 * overlap instead of coming one block at a time (a routed prompt's new half is cold in a large index).
 */
function warmPrompt(slot: i32, seqs: usize, n: i32): void {
  let warm: u64 = 0;
  for (let i = 0; i < n; i++) {
    const seq = load<u64>(seqs + (<usize>i << 3));
    warm ^= touch(entryHome(slot, seq)) ^ touch(nodeHome(seq));
  }
  settle(warm);
}

/** Drops the slot's least recent timed entries while it holds more than its capacity; returns how many. */
function enforceCapacity(slot: i32): u32 {
  const cap = lruCapacity(slot);
  if (cap == 0) return 0;
  let n: u32 = 0;
  while (lruCount(slot) > cap) {
    const t = ttlRec(<u32>lruOldest(slot));
    drop(entryFind(slot, load<u64>(t, T_HASH)));
    n++;
  }
  if (n > 0) count(C_CAPPED, n);
  return n;
}

/**
 * Approximate mode: at most `capacity` timed entries on `slot` (0 = no bound but the TTLs); entries the engine's
 * events confirmed are not counted. Returns entries dropped at once to meet it.
 */
export function setSlotCapacity(slot: i32, capacity: u32): i32 {
  if (!slotOk(slot)) { count(C_BAD_SLOT); return E_BAD_SLOT; }
  lruSetCapacity(slot, capacity);
  return <i32>enforceCapacity(slot);
}
