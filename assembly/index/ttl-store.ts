// Approximate-mode timers: one record per TTL'd entry with a stable id (entry records move, timers must not).
// The generation bumps on every change so heap items pushed for an older state pop as no-ops. Every live timer is
// also in its slot's recency list (ttl-lru.ts).
import { lruAdd, lruRemove } from "./ttl-lru";

// Record (32 bytes): expiry f64 | hash u64 | slot u32 | depth u32 | gen u32 | flags or free-list next u32
// @ts-ignore: decorator
@inline export const T_EXPIRY: usize = 0;
// @ts-ignore: decorator
@inline export const T_HASH: usize = 8;
// @ts-ignore: decorator
@inline export const T_SLOT: usize = 16;
// @ts-ignore: decorator
@inline export const T_DEPTH: usize = 20;
// @ts-ignore: decorator
@inline export const T_GEN: usize = 24;
// @ts-ignore: decorator
@inline export const T_LINK: usize = 28; // live: 1; free: next free id + 1 with the top bit set

let base: usize = 0;
let cap: u32 = 0;
let high: u32 = 0;
let freeHead: u32 = 0;
export let ttlCount: u32 = 0;

export function ttlInit(region: usize, capacity: u32): void {
  base = region;
  cap = capacity;
  high = 0;
  freeHead = 0;
  ttlCount = 0;
}

// @ts-ignore: decorator
@inline export function ttlRec(id: u32): usize { return base + (<usize>id << 5); }
export function ttlHigh(): u32 { return high; }
// @ts-ignore: decorator
@inline export function ttlLive(id: u32): bool { return load<u32>(ttlRec(id), T_LINK) == 1; }

/** A timer for (slot, hash); -1 when none is free (callers keep the live count below capacity). */
export function ttlAlloc(slot: i32, hash: u64, depth: u32, expiry: f64): i32 {
  let id: u32;
  if (freeHead != 0) {
    id = freeHead - 1;
    freeHead = load<u32>(ttlRec(id), T_LINK) & 0x7FFFFFFF;
  } else if (high < cap) {
    id = high++;
  } else {
    return -1;
  }
  const r = ttlRec(id);
  store<f64>(r, expiry, T_EXPIRY);
  store<u64>(r, hash, T_HASH);
  store<i32>(r, slot, T_SLOT);
  store<u32>(r, depth, T_DEPTH);
  store<u32>(r, load<u32>(r, T_GEN) + 1, T_GEN);
  store<u32>(r, 1, T_LINK);
  ttlCount++;
  lruAdd(slot, id);
  return <i32>id;
}

/**
 * Moves a live timer to a new expiry and depth (a sliding TTL). Returns true when the caller must push a fresh heap
 * item: only when the timer now sorts earlier than before (a clock that went back, a deeper position at the same
 * expiry). A timer that moves later keeps its heap item, whose key is then earlier than the timer's: the heap re-keys
 * it when it reaches the top (ttl-heap.ts), so a prefix refreshed by every request costs no heap work per request.
 */
export function ttlRefresh(id: u32, depth: u32, expiry: f64): bool {
  const r = ttlRec(id);
  const e0 = load<f64>(r, T_EXPIRY), d0 = load<u32>(r, T_DEPTH);
  store<f64>(r, expiry, T_EXPIRY);
  store<u32>(r, depth, T_DEPTH);
  if (expiry < e0 || (expiry == e0 && depth > d0)) {
    store<u32>(r, load<u32>(r, T_GEN) + 1, T_GEN);
    return true;
  }
  return false;
}

export function ttlFree(id: u32): void {
  const r = ttlRec(id);
  lruRemove(load<i32>(r, T_SLOT), id);
  store<u32>(r, load<u32>(r, T_GEN) + 1, T_GEN);
  store<u32>(r, freeHead | 0x80000000, T_LINK);
  freeHead = id + 1;
  ttlCount--;
}
