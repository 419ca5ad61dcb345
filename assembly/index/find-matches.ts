// Prefix matching: for each worker slot, how many leading blocks of a prompt it holds, by ANDing node masks down the chain.
// With a jump J > 1 only every J-th block is probed while no slot drops out, and the blocks in between are walked one
// by one only where one does: exact whenever each slot's blocks are prefix-closed, as engines' LRU eviction keeps them.
import { nodeFind, words } from "./node-table";

// Probes issued before their masks are consumed: independent lookups let the CPU overlap cache misses.
// @ts-ignore: decorator
@inline const BATCH = 16;
/** The jump points' probes (masks on the single-word path, record addresses otherwise). */
const probes: usize = memory.data(BATCH * 8, 16);
/** The probes of a window walked one by one. */
const walk: usize = memory.data(BATCH * 8, 16);

export const MAX_JUMP: i32 = 1024;
/** Blocks between probes while no slot drops; 1 probes every block (exact on any index). */
let jump: i32 = 1;

export function setJump(j: i32): void {
  jump = j;
}

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

// @ts-ignore: decorator
@inline function seqAt(seqs: usize, i: i32): u64 {
  return load<u64>(seqs + (<usize>i << 3));
}

// @ts-ignore: decorator
@inline function maskAt(seqs: usize, i: i32): u64 {
  const r = nodeFind(seqAt(seqs, i));
  return r == 0 ? 0 : load<u64>(r, 8);
}

/**
 * Walks the `n` sequence hashes at `seqs`; writes (slot u32, depth u32) pairs to `out` for every slot holding at
 * least the first block and returns the pair count. A slot's depth is the first position where it is missing.
 * `active` is scratch for `words` u64.
 */
export function findMatches(seqs: usize, n: i32, out: usize, active: usize): i32 {
  if (n <= 0) return 0;
  const first = nodeFind(seqAt(seqs, 0));
  if (first == 0) return 0;
  const w = words;
  if (w == 1) return findSingleWord(seqs, n, out, load<u64>(first, 8));
  memory.copy(active, first + 8, <usize>w << 3);
  let written = 0;
  let p = 0; // every active slot holds positions 0..p
  // Up to BATCH jump points are looked up before their masks are read, so their cache misses overlap.
  while (p < n - 1) {
    const cnt = min(BATCH, (n - 1 - p + jump - 1) / jump);
    for (let j = 0; j < cnt; j++) {
      store<usize>(probes + (<usize>j << 3), nodeFind(seqAt(seqs, min(p + (j + 1) * jump, n - 1))));
    }
    for (let j = 0; j < cnt; j++) {
      const q = min(p + jump, n - 1);
      const r = load<usize>(probes + (<usize>j << 3));
      if (!coversActive(active, r, w)) {
        written = walkMulti(seqs, p + 1, q, r, out, active, w, written);
        if (noneActive(active, w)) return written;
      }
      p = q;
    }
  }
  for (let k = 0; k < w; k++) written = emit(out, written, load<u64>(active + (<usize>k << 3)), k << 6, n);
  return written;
}

/** Whether record `r` (0 = absent) holds every active slot. */
function coversActive(active: usize, r: usize, w: i32): bool {
  for (let k = 0; k < w; k++) {
    const a = load<u64>(active + (<usize>k << 3));
    if (a == 0) continue;
    if (r == 0 || (a & load<u64>(r + 8 + (<usize>k << 3))) != a) return false;
  }
  return true;
}

function noneActive(active: usize, w: i32): bool {
  for (let k = 0; k < w; k++) if (load<u64>(active + (<usize>k << 3)) != 0) return false;
  return true;
}

/** ANDs record `r` (0 = absent) into the active masks, emitting the slots it drops at `depth`. */
// @ts-ignore: decorator
@inline function keepMulti(active: usize, r: usize, w: i32, out: usize, written: i32, depth: i32): i32 {
  for (let k = 0; k < w; k++) {
    const a = load<u64>(active + (<usize>k << 3));
    if (a == 0) continue;
    const m = r == 0 ? 0 : load<u64>(r + 8 + (<usize>k << 3));
    store<u64>(active + (<usize>k << 3), a & m);
    written = emit(out, written, a & ~m, k << 6, depth);
  }
  return written;
}

/** Positions `from`..`to` one by one (`to`'s record is `last`), dropping each slot where it is first missing. */
function walkMulti(seqs: usize, from: i32, to: i32, last: usize, out: usize, active: usize, w: i32, written: i32): i32 {
  let i = from;
  while (i < to) {
    const cnt = min(BATCH, to - i);
    for (let j = 0; j < cnt; j++) store<usize>(walk + (<usize>j << 3), nodeFind(seqAt(seqs, i + j)));
    for (let j = 0; j < cnt; j++, i++) {
      written = keepMulti(active, load<usize>(walk + (<usize>j << 3)), w, out, written, i);
      if (noneActive(active, w)) return written;
    }
  }
  return keepMulti(active, last, w, out, written, to);
}

/** Up to 64 slots: the active mask lives in a local, and masks are fetched BATCH probes at a time. */
function findSingleWord(seqs: usize, n: i32, out: usize, mask: u64): i32 {
  let a = mask;
  let written = 0;
  let p = 0;
  while (p < n - 1) {
    const cnt = min(BATCH, (n - 1 - p + jump - 1) / jump);
    for (let j = 0; j < cnt; j++) store<u64>(probes + (<usize>j << 3), maskAt(seqs, min(p + (j + 1) * jump, n - 1)));
    for (let j = 0; j < cnt; j++) {
      const q = min(p + jump, n - 1);
      const m = load<u64>(probes + (<usize>j << 3));
      if ((a & m) != a) {
        // Someone is missing at q: walk p+1..q-1 for where each slot first went missing, then apply q itself.
        let i = p + 1;
        while (i < q && a != 0) {
          const c = min(BATCH, q - i);
          for (let t = 0; t < c; t++) store<u64>(walk + (<usize>t << 3), maskAt(seqs, i + t));
          for (let t = 0; t < c && a != 0; t++, i++) {
            const kept = a & load<u64>(walk + (<usize>t << 3));
            written = emit(out, written, a & ~kept, 0, i);
            a = kept;
          }
        }
        written = emit(out, written, a & ~m, 0, q);
        a &= m;
        if (a == 0) return written;
      }
      p = q;
    }
  }
  return emit(out, written, a, 0, n);
}
