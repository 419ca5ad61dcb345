// Entries: what each worker slot holds, keyed by (slot, engine block hash), with stable ids, per-slot lists and TTLs.
// Record layout in the arena (48 bytes) — see the E_* offsets; the lookup table maps (slot, hash) to id + 1.

// @ts-ignore: decorator
@inline export const E_HASH: usize = 0;
// @ts-ignore: decorator
@inline export const E_SEQ: usize = 8;
// @ts-ignore: decorator
@inline export const E_EXPIRY: usize = 16;
// @ts-ignore: decorator
@inline export const E_SLOT: usize = 24;
// @ts-ignore: decorator
@inline export const E_PREV: usize = 28;
// @ts-ignore: decorator
@inline export const E_NEXT: usize = 32;
// @ts-ignore: decorator
@inline export const E_DEPTH: usize = 36;
// @ts-ignore: decorator
@inline export const E_GEN: usize = 40;
// @ts-ignore: decorator
@inline export const E_FLAGS: usize = 44;
// @ts-ignore: decorator
@inline export const ENTRY_BYTES: usize = 48;

export const F_LIVE: u32 = 1;
/** The entry points at a node whose slot bit another entry of the same slot owns (two engine hashes, one prefix). */
export const F_ALIAS: u32 = 2;

let arena: usize = 0;
let capacity: u32 = 0;
let highWater: u32 = 0;
let freeHead: u32 = 0; // id + 1
export let liveEntries: u32 = 0;

let table: usize = 0;
let tMask: u64 = 0;
let tShift: u64 = 0;
let tSalt: u64 = 0;

export function entryInit(arenaBase: usize, cap: u32, tableBase: usize, tableCount: u64, saltOdd: u64): void {
  arena = arenaBase;
  capacity = cap;
  highWater = 0;
  freeHead = 0;
  liveEntries = 0;
  table = tableBase;
  tMask = tableCount - 1;
  tShift = 64 - <u64>ctz<u64>(tableCount);
  tSalt = saltOdd | 1;
}

export function entryCapacity(): u32 { return capacity; }
export function entryHighWater(): u32 { return highWater; }
export function freeEntries(): u32 { return capacity - liveEntries; }

// @ts-ignore: decorator
@inline export function rec(id: u32): usize { return arena + <usize>id * ENTRY_BYTES; }

// @ts-ignore: decorator
@inline function tHome(slot: i32, hash: u64): u64 {
  return ((hash ^ (<u64>slot * 0xD6E8FEB86659FD93)) * tSalt) >> tShift;
}

// @ts-ignore: decorator
@inline function tRec(i: u64): usize { return table + (<usize>i << 4); }

/** Entry id for (slot, hash), or -1. */
export function entryFind(slot: i32, hash: u64): i32 {
  let i = tHome(slot, hash);
  while (true) {
    const r = tRec(i);
    const idp = load<u32>(r, 12);
    if (idp == 0) return -1;
    if (load<u64>(r) == hash && load<i32>(r, 8) == slot) return <i32>(idp - 1);
    i = (i + 1) & tMask;
  }
  return -1;
}

/** Allocates a live entry for (slot, hash), linked at the head of the slot's list; -1 when the arena is full. */
export function entryCreate(slot: i32, hash: u64, seq: u64, depth: u32, heads: usize): i32 {
  let id: u32;
  if (freeHead != 0) {
    id = freeHead - 1;
    freeHead = load<u32>(rec(id), E_NEXT);
  } else if (highWater < capacity) {
    id = highWater++;
  } else {
    return -1;
  }
  const r = rec(id);
  const gen = load<u32>(r, E_GEN) + 1;
  store<u64>(r, hash, E_HASH);
  store<u64>(r, seq, E_SEQ);
  store<f64>(r, 0, E_EXPIRY);
  store<i32>(r, slot, E_SLOT);
  store<u32>(r, 0, E_PREV);
  const head = load<u32>(heads + (<usize>slot << 2));
  store<u32>(r, head, E_NEXT);
  if (head != 0) store<u32>(rec(head - 1), id + 1, E_PREV);
  store<u32>(heads + (<usize>slot << 2), id + 1);
  store<u32>(r, depth, E_DEPTH);
  store<u32>(r, gen, E_GEN);
  store<u32>(r, F_LIVE, E_FLAGS);
  liveEntries++;
  let i = tHome(slot, hash);
  while (load<u32>(tRec(i), 12) != 0) i = (i + 1) & tMask;
  const t = tRec(i);
  store<u64>(t, hash);
  store<i32>(t, slot, 8);
  store<u32>(t, id + 1, 12);
  return <i32>id;
}

/** Unlinks and frees entry `id` (its node bookkeeping is the caller's). Bumps the generation so TTL timers go stale. */
export function entryFree(id: u32, heads: usize): void {
  const r = rec(id);
  const slot = load<i32>(r, E_SLOT);
  const hash = load<u64>(r, E_HASH);
  const prev = load<u32>(r, E_PREV), next = load<u32>(r, E_NEXT);
  if (prev != 0) store<u32>(rec(prev - 1), next, E_NEXT);
  else store<u32>(heads + (<usize>slot << 2), next);
  if (next != 0) store<u32>(rec(next - 1), prev, E_PREV);
  store<u32>(r, 0, E_FLAGS);
  store<u32>(r, load<u32>(r, E_GEN) + 1, E_GEN);
  store<u32>(r, freeHead, E_NEXT);
  freeHead = id + 1;
  liveEntries--;
  tableDelete(slot, hash);
}

function tableDelete(slot: i32, hash: u64): void {
  let i = tHome(slot, hash);
  while (true) {
    const r = tRec(i);
    if (load<u32>(r, 12) == 0) return;
    if (load<u64>(r) == hash && load<i32>(r, 8) == slot) break;
    i = (i + 1) & tMask;
  }
  let j = i;
  while (true) {
    j = (j + 1) & tMask;
    const rj = tRec(j);
    if (load<u32>(rj, 12) == 0) break;
    const k = tHome(load<i32>(rj, 8), load<u64>(rj));
    const stay = i <= j ? (k > i && k <= j) : (k > i || k <= j);
    if (!stay) {
      memory.copy(tRec(i), rj, 16);
      i = j;
    }
  }
  memory.fill(tRec(i), 0, 16);
}
