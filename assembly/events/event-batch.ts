// Decodes a batch of KV events in kvgate's compact binary form (see docs in src/wasm/event-encoder.ts) and applies it.
// Each record is applied atomically; a truncated or unknown record stops the batch without touching the index.
import { storeBlocks, removeBlocks, clearSlot, count } from "../index/block-index";
import { entryHome } from "../index/entry-table";
import { touch, settle } from "../index/touch";
import { hashBlocks, MAX_BLOCK_SIZE } from "../hash/prompt";
import { E_CORRUPT, C_CORRUPT, C_INVALID } from "../abi";

export const K_STORED: u8 = 1;
export const K_REMOVED: u8 = 2;
export const K_CLEARED: u8 = 3;
export const K_STORED_TOKENS: u8 = 4;
export const F_HAS_PARENT: u8 = 1;

/** Byte offset of the first corrupt record after a failed `applyBatch`. */
export let corruptAt: i32 = 0;

/** Applies `len` bytes of records at `p`; returns records processed, or E_CORRUPT (see `corruptAt`). */
export function applyBatch(p: usize, len: usize, io: usize, ioPairs: i32): i32 {
  let off: usize = 0;
  let records = 0;
  while (off < len) {
    if (len - off < 16) return corrupt(off);
    const r = p + off;
    const kind = load<u8>(r);
    const flags = load<u8>(r, 1);
    const slot = load<i32>(r, 4);
    const n = load<u32>(r, 8);
    const aux = load<u32>(r, 12);
    const size = recordBytes(kind, n, aux);
    if (size == 0 || size - 16 > <u64>(len - off - 16)) return corrupt(off);
    warmNext(p, off + <usize>size, len);
    if (kind == K_STORED) {
      storeBlocks(slot, (flags & F_HAS_PARENT) != 0, load<u64>(r, 16), r + 24, <i32>n);
    } else if (kind == K_REMOVED) {
      removeBlocks(slot, r + 16, <i32>n);
    } else if (kind == K_CLEARED) {
      clearSlot(slot);
    } else if (n > <u32>ioPairs) {
      count(C_INVALID);
    } else {
      // K_STORED_TOKENS: IO holds ioPairs pairs (engine hash, local hash) followed by ioPairs words of scratch for
      // the local hashes.
      const hashes = r + 32;
      const tokens = hashes + (<usize>n << 3);
      hashBlocks(tokens, <i32>n, <i32>aux, load<u64>(r, 24), io + (<usize>ioPairs << 4));
      for (let i: usize = 0; i < <usize>n; i++) {
        store<u64>(io + (i << 4), load<u64>(hashes + (i << 3)));
        store<u64>(io + (i << 4) + 8, load<u64>(io + (<usize>ioPairs << 4) + (i << 3)));
      }
      storeBlocks(slot, (flags & F_HAS_PARENT) != 0, load<u64>(r, 16), io, <i32>n);
    }
    off += <usize>size;
    records++;
  }
  return records;
}

/**
 * Bytes of the record with this header, the header included; 0 for an unknown kind or a Stored-with-tokens block size
 * out of range (a corrupt record).
 */
function recordBytes(kind: u8, n: u32, aux: u32): u64 {
  if (kind == K_STORED) return 24 + <u64>n * 16;
  if (kind == K_REMOVED) return 16 + <u64>n * 8;
  if (kind == K_CLEARED) return 16;
  if (kind == K_STORED_TOKENS && aux != 0 && aux <= <u32>MAX_BLOCK_SIZE) return 32 + <u64>n * 8 + ((<u64>n * <u64>aux * 4 + 7) & ~7);
  return 0;
}

/**
 * Warms the entries of the next record's first blocks while this one is applied: an engine step is many events of a
 * block or two, each too short to overlap its own misses. Loads only; a malformed next record warms nothing useful.
 */
function warmNext(p: usize, off: usize, len: usize): void {
  if (off > len || len - off < 16) return;
  const r = p + off;
  const kind = load<u8>(r);
  const slot = load<i32>(r, 4);
  let at: usize = 0;
  let step: usize = 8;
  if (kind == K_STORED) { at = 24; step = 16; }
  else if (kind == K_REMOVED) at = 16;
  else if (kind == K_STORED_TOKENS) at = 32;
  else return;
  const n = min<u32>(load<u32>(r, 8), WARM_AHEAD);
  let warm: u64 = 0;
  for (let i: u32 = 0; i < n && off + at + step * (<usize>i + 1) <= len; i++) warm ^= touch(entryHome(slot, load<u64>(r + at + step * <usize>i)));
  settle(warm);
}

/** Blocks of the next record warmed ahead: longer records warm their own runs (block-index.ts). */
// @ts-ignore: decorator
@inline const WARM_AHEAD: u32 = 4;

function corrupt(off: usize): i32 {
  corruptAt = <i32>off;
  count(C_CORRUPT);
  return E_CORRUPT;
}
