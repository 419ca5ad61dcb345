// Prefix matching: for each worker slot, how many leading blocks of a prompt it holds, by ANDing node masks down the chain.
import { nodeFind, words } from "./node-table";

// Probes issued before their masks are consumed: independent lookups let the CPU overlap cache misses.
// @ts-ignore: decorator
@inline const BATCH = 16;
const probes: usize = memory.data(BATCH * 8, 16);

/** Writes one (slot, depth) pair for every bit of `bits` (slot = base + bit) at pair index `written`; returns the new count. */
// @ts-ignore: decorator
@inline function emit(out: usize, written: i32, bits: u64, base: i32, depth: i32): i32 {
  while (bits != 0) {
    const o = out + (<usize>written << 3);
    store<u32>(o, base + <i32>ctz<u64>(bits));
    store<u32>(o, depth, 4);
    written++;
    bits &= bits - 1;
  }
  return written;
}

/**
 * Walks the `n` sequence hashes at `seqs`; writes (slot u32, depth u32) pairs to `out` for every slot holding at
 * least the first block and returns the pair count. A slot's depth is the first position where it is missing.
 * `active` is scratch for `words` u64.
 */
export function findMatches(seqs: usize, n: i32, out: usize, active: usize): i32 {
  if (n <= 0) return 0;
  const first = nodeFind(load<u64>(seqs));
  if (first == 0) return 0;
  const w = words;
  if (w == 1) return findSingleWord(seqs, n, out, load<u64>(first, 8));
  memory.copy(active, first + 8, <usize>w << 3);
  let written = 0;
  let depth = 1;
  // As findSingleWord: BATCH records are looked up before their masks are read, so their cache misses overlap.
  while (depth < n) {
    const batch = min(BATCH, n - depth);
    for (let j = 0; j < batch; j++) store<usize>(probes + (<usize>j << 3), nodeFind(load<u64>(seqs + (<usize>(depth + j) << 3))));
    for (let j = 0; j < batch; j++, depth++) {
      const r = load<usize>(probes + (<usize>j << 3));
      let any: u64 = 0;
      for (let k = 0; k < w; k++) {
        const a = load<u64>(active + (<usize>k << 3));
        if (a == 0) continue;
        const m = r == 0 ? 0 : load<u64>(r + 8 + (<usize>k << 3));
        const kept = a & m;
        store<u64>(active + (<usize>k << 3), kept);
        any |= kept;
        written = emit(out, written, a & ~m, k << 6, depth);
      }
      if (any == 0) return written;
    }
  }
  for (let k = 0; k < w; k++) written = emit(out, written, load<u64>(active + (<usize>k << 3)), k << 6, depth);
  return written;
}

/** Up to 64 slots: the active mask lives in a local, and masks are fetched BATCH probes at a time. */
function findSingleWord(seqs: usize, n: i32, out: usize, mask: u64): i32 {
  let a = mask;
  let written = 0;
  let depth = 1;
  while (depth < n) {
    const m = min(BATCH, n - depth);
    for (let j = 0; j < m; j++) {
      const r = nodeFind(load<u64>(seqs + (<usize>(depth + j) << 3)));
      store<u64>(probes + (<usize>j << 3), r == 0 ? 0 : load<u64>(r, 8));
    }
    for (let j = 0; j < m; j++, depth++) {
      const kept = a & load<u64>(probes + (<usize>j << 3));
      written = emit(out, written, a & ~kept, 0, depth);
      a = kept;
      if (a == 0) return written;
    }
  }
  return emit(out, written, a, 0, depth);
}
