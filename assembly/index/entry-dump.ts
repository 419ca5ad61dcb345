// Index snapshots for warm restarts: every live entry out as a fixed record, and back into a fresh instance, so a
// restarted router need not wait for engine events (or a trimmed stream) to rebuild what it knew.
// Record (32 bytes): engine hash u64 | prefix (seq) u64 | slot u32 | depth u32 | TTL left in ms f64 (0: no TTL).
import { create, createAt, prune, slotOk, evictFor, count } from "./block-index";
import { recAt, tableCount, isLive, entryProbe, freeEntries, R_HASH, R_SEQ, R_SLOT, R_DEPTH, R_TTL } from "./entry-table";
import { ttlAlloc, ttlRec, T_EXPIRY } from "./ttl-store";
import { lruUnknown } from "./ttl-lru";
import { heapPush } from "./ttl-heap";
import { C_CAPACITY, C_BAD_SLOT } from "../abi";

export const DUMP_RECORD_BYTES: usize = 32;

/**
 * Writes up to `max` records from table position `cursor` on into `out`; the position to continue from lands at
 * `next` (u64; the table size once done). TTLs are written as time left at `now`; entries already expired are left out.
 * A caller must finish a dump before changing the index (a delete moves records between positions).
 */
export function dumpEntries(cursor: u64, max: u32, now: f64, out: usize, next: usize): u32 {
  const n = tableCount();
  let i = cursor, w: u32 = 0;
  while (i < n && w < max) {
    const r = recAt(i++);
    if (!isLive(r)) continue;
    const t = load<u32>(r, R_TTL);
    let left: f64 = 0;
    if (t != 0) {
      left = load<f64>(ttlRec(t - 1), T_EXPIRY) - now;
      if (!(left > 0)) continue;
    }
    const o = out + (<usize>w << 5);
    store<u64>(o, load<u64>(r, R_HASH));
    store<u64>(o, load<u64>(r, R_SEQ), 8);
    store<u32>(o, load<u32>(r, R_SLOT), 16);
    store<u32>(o, load<u32>(r, R_DEPTH), 20);
    store<f64>(o, left, 24);
    w++;
  }
  store<u64>(next, i);
  return w;
}

/**
 * Inserts `n` records from `src` (slots already mapped to open slots of this instance). A (slot, hash) already present
 * is kept as it is; records of closed slots, with a bad TTL, or beyond capacity are skipped. Approximate entries evict
 * older approximate ones like record_route does. Returns the records inserted.
 */
export function loadEntries(src: usize, n: u32, now: f64): u32 {
  let done: u32 = 0;
  for (let i: u32 = 0; i < n; i++) {
    const o = src + (<usize>i << 5);
    const hash = load<u64>(o), seq = load<u64>(o, 8);
    const slot = load<i32>(o, 16), depth = load<u32>(o, 20);
    const left = load<f64>(o, 24);
    if (!slotOk(slot)) { count(C_BAD_SLOT); continue; }
    if (!(left >= 0 && left < Infinity)) continue;
    let r = entryProbe(slot, hash);
    if (isLive(r)) continue;
    if (freeEntries() == 0) {
      evictFor(1);
      if (freeEntries() == 0) { count(C_CAPACITY); break; }
      // Evicting moved records: probe again.
      r = entryProbe(slot, hash);
    }
    if (left > 0) {
      const id = ttlAlloc(slot, hash, depth, now + left);
      // Pruning after every insert keeps timers within approxMax + 1, as in record(); running out is a bug.
      if (id < 0) unreachable();
      lruUnknown(slot, <u32>id);
      const e = create(slot, hash, seq, depth);
      store<u32>(e, <u32>id + 1, R_TTL);
      heapPush(<u32>id);
      prune();
    } else {
      createAt(r, slot, hash, seq, depth);
    }
    done++;
  }
  return done;
}
