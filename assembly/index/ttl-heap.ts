// Min-heap of TTL timers for approximate-mode entries, ordered by (expiry, deeper first, slot, hash).
// Items carry the timer generation they were pushed for; a freed timer (or one moved earlier) leaves a stale item that
// pops as a no-op. A timer moved later keeps its item with the old, earlier key: every live timer's item sorts no
// later than the timer itself, so a top item whose timer has moved on is re-keyed and sifted down, never returned.
import { ttlRec, ttlLive, ttlHigh, T_GEN, T_EXPIRY, T_DEPTH, T_SLOT, T_HASH } from "./ttl-store";
import { copy32 } from "./record-moves";
import { touch, settle } from "./touch";

// Item: expiry f64 | depth u32 | slot u32 | hash u64 | id u32 | gen u32  (32 bytes)
/** Offsets of an item's fields that callers outside the heap read too. */
// @ts-ignore: decorator
@inline export const I_SLOT: usize = 12;
// @ts-ignore: decorator
@inline export const I_HASH: usize = 16;
// @ts-ignore: decorator
@inline export const I_ID: usize = 24;

let heap: usize = 0;
let cap: u32 = 0;
export let heapLen: u32 = 0;

/** `base` holds `capacity` items and 64 bytes more: the heap starts 32 bytes into a line, so each item's four children share two lines. */
export function heapInit(base: usize, capacity: u32): void {
  heap = ((base + 63) & ~63) + 32;
  cap = capacity;
  heapLen = 0;
}

// @ts-ignore: decorator
@inline function item(i: u32): usize { return heap + (<usize>i << 5); }

// @ts-ignore: decorator
@inline function before(a: usize, b: usize): bool {
  const ea = load<f64>(a), eb = load<f64>(b);
  if (ea != eb) return ea < eb;
  const da = load<u32>(a, 8), db = load<u32>(b, 8);
  if (da != db) return da > db;
  const sa = load<u32>(a, I_SLOT), sb = load<u32>(b, I_SLOT);
  if (sa != sb) return sa < sb;
  return load<u64>(a, I_HASH) < load<u64>(b, I_HASH);
}

// Four children per item: half the levels of a binary heap, and a node's children share two cache lines, so a
// sift (one per refreshed timer reaching the top) touches half as many lines of a heap that does not fit in cache.
// Pop order is the same as any heap's: `before` is a total order on live timers.
// @ts-ignore: decorator
@inline const ARITY: u32 = 4;

/** Where a sifted item waits while the items it passes move into its hole. */
const HELD: usize = memory.data(32, 16);

function siftUp(i: u32): void {
  copy32(HELD, item(i));
  while (i > 0) {
    const p = (i - 1) / ARITY;
    if (!before(HELD, item(p))) break;
    copy32(item(i), item(p));
    i = p;
  }
  copy32(item(i), HELD);
}

function siftDown(i: u32): void {
  copy32(HELD, item(i));
  let warm: u64 = 0;
  while (true) {
    const first: u32 = ARITY * i + 1;
    if (first >= heapLen) break;
    const last = min<u32>(first + ARITY, heapLen);
    // Fetch the next level's candidates (each child's children: 16 items, 8 lines) while these four are compared, so
    // a sift through a heap larger than the caches waits for one level's misses at a time, not one level after another.
    const g: u32 = ARITY * first + 1;
    if (g < heapLen && g + ARITY * ARITY <= cap) for (let k: u32 = 0; k < ARITY * ARITY; k += 2) warm ^= touch(item(g + k));
    let m = first;
    for (let c = first + 1; c < last; c++) if (before(item(c), item(m))) m = c;
    if (!before(item(m), HELD)) break;
    copy32(item(i), item(m));
    i = m;
  }
  copy32(item(i), HELD);
  settle(warm);
}

function write(i: u32, id: u32): void {
  const r = ttlRec(id), t = item(i);
  store<f64>(t, load<f64>(r, T_EXPIRY));
  store<u32>(t, load<u32>(r, T_DEPTH), 8);
  store<u32>(t, load<u32>(r, T_SLOT), I_SLOT);
  store<u64>(t, load<u64>(r, T_HASH), I_HASH);
  store<u32>(t, id, I_ID);
  store<u32>(t, load<u32>(r, T_GEN), 28);
}

/** Rebuilds the heap from live TTL entries, dropping stale items; keeps the heap bounded by the live count. */
function compact(): void {
  heapLen = 0;
  const hw = ttlHigh();
  for (let id: u32 = 0; id < hw; id++) if (ttlLive(id)) write(heapLen++, id);
  if (heapLen > 1) for (let i = (heapLen - 2) / ARITY + 1; i-- > 0;) siftDown(i);
}

/** Pushes timer `id` at its current expiry and generation. */
export function heapPush(id: u32): void {
  if (heapLen >= cap) compact();
  // Live timers are bounded below cap by pruning; reaching it is a bug, and a trap makes the host rebuild the index.
  if (heapLen >= cap) unreachable();
  write(heapLen, id);
  heapLen++;
  siftUp(heapLen - 1);
}

/** Removes stale items from the top and re-keys lazily refreshed ones; returns the live entry id at the top, or -1. */
export function heapPeekLive(): i32 {
  while (heapLen > 0) {
    const t = item(0);
    const id = load<u32>(t, I_ID);
    if (ttlLive(id) && load<u32>(ttlRec(id), T_GEN) == load<u32>(t, 28)) {
      const r = ttlRec(id);
      const e = load<f64>(r, T_EXPIRY), d = load<u32>(r, T_DEPTH);
      if (load<f64>(t) == e && load<u32>(t, 8) == d) return <i32>id;
      store<f64>(t, e);
      store<u32>(t, d, 8);
      siftDown(0);
      continue;
    }
    heapPop();
  }
  return -1;
}

/** The top item, live or stale (0 when empty): what an eviction loop warms while it drops the one before. */
export function heapTop(): usize {
  return heapLen > 0 ? item(0) : 0;
}

export function heapTopExpiry(): f64 {
  return load<f64>(item(0));
}

export function heapPop(): void {
  heapLen--;
  if (heapLen > 0) {
    copy32(item(0), item(heapLen));
    siftDown(0);
  }
}
