// Entries: what each worker slot holds, one open-addressing record per (slot, engine block hash) carrying its prefix,
// so an event touches this table and the node table and nothing else. Record addresses move on deletion (backward
// shift): callers never keep one across a delete.
import { copy32, zero32 } from "./record-moves";

// Record (32 bytes): hash u64 | seq u64 | slot u32 | flags u32 | depth u32 | ttl id + 1 u32 (0: no TTL)
// @ts-ignore: decorator
@inline export const R_HASH: usize = 0;
// @ts-ignore: decorator
@inline export const R_SEQ: usize = 8;
// @ts-ignore: decorator
@inline export const R_SLOT: usize = 16;
// @ts-ignore: decorator
@inline export const R_FLAGS: usize = 20;
// @ts-ignore: decorator
@inline export const R_DEPTH: usize = 24;
// @ts-ignore: decorator
@inline export const R_TTL: usize = 28;
// @ts-ignore: decorator
@inline export const RECORD_BYTES: usize = 32;

/** Occupied record. */
export const F_LIVE: u32 = 1;
/** The entry points at a node whose slot bit another entry of the same slot owns (two engine hashes, one prefix). */
export const F_ALIAS: u32 = 2;

let table: usize = 0;
let tMask: u64 = 0;
let tShift: u64 = 0;
let tSalt: u64 = 0;
let capacity: u32 = 0;
export let liveEntries: u32 = 0;

export function entryInit(base: usize, count: u64, cap: u32, saltOdd: u64): void {
  table = base;
  tMask = count - 1;
  tShift = 64 - <u64>ctz<u64>(count);
  tSalt = saltOdd | 1;
  capacity = cap;
  liveEntries = 0;
}

export function entryCapacity(): u32 { return capacity; }
export function freeEntries(): u32 { return capacity - liveEntries; }
export function tableCount(): u64 { return tMask + 1; }

// @ts-ignore: decorator
@inline export function recAt(i: u64): usize { return table + (<usize>i << 5); }

// @ts-ignore: decorator
@inline function tHome(slot: i32, hash: u64): u64 {
  return ((hash ^ (<u64>slot * 0xD6E8FEB86659FD93)) * tSalt) >> tShift;
}

/** Where the probe for (slot, hash) starts: what `touch` warms before a run of lookups. */
// @ts-ignore: decorator
@inline export function entryHome(slot: i32, hash: u64): usize { return recAt(tHome(slot, hash)); }

/** The record after the home: a delete there reads it (backward shift), and half the time it starts the next line. */
// @ts-ignore: decorator
@inline export function entryAfterHome(slot: i32, hash: u64): usize { return recAt((tHome(slot, hash) + 1) & tMask); }

// @ts-ignore: decorator
@inline export function isLive(r: usize): bool { return (load<u32>(r, R_FLAGS) & F_LIVE) != 0; }

/** Record address for (slot, hash), or 0. */
export function entryFind(slot: i32, hash: u64): usize {
  let i = tHome(slot, hash);
  while (true) {
    const r = recAt(i);
    if (!isLive(r)) return 0;
    if (load<u64>(r, R_HASH) == hash && load<i32>(r, R_SLOT) == slot) return r;
    i = (i + 1) & tMask;
  }
  return 0;
}

/** The live record for (slot, hash), or the empty record where it would go (check with `isLive`). */
export function entryProbe(slot: i32, hash: u64): usize {
  let i = tHome(slot, hash);
  while (true) {
    const r = recAt(i);
    if (!isLive(r)) return r;
    if (load<u64>(r, R_HASH) == hash && load<i32>(r, R_SLOT) == slot) return r;
    i = (i + 1) & tMask;
  }
  return 0;
}

/** Fills the empty record `r` that `entryProbe` returned (nothing may have been deleted in between). */
export function entryFill(r: usize, slot: i32, hash: u64, seq: u64, depth: u32): void {
  store<u64>(r, hash, R_HASH);
  store<u64>(r, seq, R_SEQ);
  store<i32>(r, slot, R_SLOT);
  store<u32>(r, F_LIVE, R_FLAGS);
  store<u32>(r, depth, R_DEPTH);
  store<u32>(r, 0, R_TTL);
  liveEntries++;
}

/** Inserts a live record for a (slot, hash) known to be absent; the caller has checked `freeEntries()`. */
export function entryInsert(slot: i32, hash: u64, seq: u64, depth: u32): usize {
  const r = entryProbe(slot, hash);
  entryFill(r, slot, hash, seq, depth);
  return r;
}

/** Deletes the record at `r`, shifting later records of its probe run back so lookups never need tombstones. */
export function entryDeleteAt(r: usize): void {
  liveEntries--;
  let i = <u64>((r - table) >> 5);
  let j = i;
  while (true) {
    j = (j + 1) & tMask;
    const rj = recAt(j);
    if (!isLive(rj)) break;
    const k = tHome(load<i32>(rj, R_SLOT), load<u64>(rj, R_HASH));
    const stay = i <= j ? (k > i && k <= j) : (k > i || k <= j);
    if (!stay) {
      copy32(recAt(i), rj);
      i = j;
    }
  }
  zero32(recAt(i));
}
