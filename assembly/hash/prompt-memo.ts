// Recent prompts with their block hashes, so a prompt that repeats or extends one (the next turn of a conversation,
// a shared system prompt) compares its tokens instead of hashing them: comparing is ~10× cheaper than XXH3 per byte.
// Exact by construction: hashes are reused only for blocks whose whole window matches token for token.
import { reserve } from "../memory";
import { E_BAD_ARG, E_NO_MEMORY, E_STATE, OK, C_MEMO_REUSED, C_MEMO_HASHED } from "../abi";

// A prompt is found by the local hash of one of its blocks at positions 0, 1, 3, 7, 15, …: each entry is filed
// under block 0 and under the deepest such position it holds, in a direct-mapped directory. Conversations that
// share a system prompt differ at their deep key, so each finds its own history; a new one still finds the
// system prompt through block 0.
// Entry record (ENTRY bytes): block-0 key u64, seed u64, ring position u64, last use u64, block size i32,
// tokens i32, blocks i32, flags i32, deep key u64, deep position i32, pad.
const ENTRY: usize = 64;
const MAX_ENTRIES: i32 = 4096;

let entries: usize = 0, entryCount = 0;
let dir: usize = 0, dirMask: u64 = 0;
let ring: usize = 0, ringBytes: u64 = 0;
let writePos: u64 = 0, clock: u64 = 0;
let counters: usize = 0;
// Doorkeeper: block-0 keys seen once, direct-mapped. A prompt is remembered only when its key was seen before (or a
// remembered prompt shares a key with it), so one-off prompts cost a probe instead of a copy into the ring.
let seen: usize = 0, seenMask: u64 = 0;
// The lookup's choice, kept for `memoKeep` of the same prompt.
let best = -1, bestTokens = 0, bestBlocks = 0;

/** Reserves the memo: `count` entries over a ring of `bytes` (0 and 0: off). Once per instance. */
export function memoInit(count: i32, bytes: i32, countersAt: usize): i32 {
  if (entries != 0) return E_STATE;
  if (count < 0 || count > MAX_ENTRIES || bytes < 0 || (count == 0) != (bytes == 0)) return E_BAD_ARG;
  if (count == 0) return OK;
  let slots: u32 = 1024;
  while (slots < <u32>count * 16) slots <<= 1;
  const e = reserve(<usize>count * ENTRY), r = reserve(<usize>bytes & ~7);
  const d = reserve(<usize>slots << 2), s = reserve(<usize>slots << 3);
  if (e == 0 || r == 0 || d == 0 || s == 0) return E_NO_MEMORY;
  entries = e;
  entryCount = count;
  ring = r;
  ringBytes = <u64>(bytes & ~7);
  dir = d;
  dirMask = <u64>(slots - 1);
  seen = s;
  seenMask = <u64>(slots - 1);
  counters = countersAt;
  return OK;
}

export function memoEnabled(): bool {
  return entryCount > 0;
}

/** The next key position after `p` (0, 1, 3, 7, …). */
// @ts-ignore: decorator
@inline export function nextKeyPosition(p: i32): i32 {
  return p * 2 + 1;
}

/** The deepest key position below `n` blocks (0 for one block). */
export function deepestKeyPosition(n: i32): i32 {
  let p = 0;
  while (nextKeyPosition(p) < n) p = nextKeyPosition(p);
  return p;
}

/** Bytes of an entry's tokens in the ring, padded so its hashes that follow are 8-byte aligned. */
// @ts-ignore: decorator
@inline function tokenBytes(nTokens: i32): usize {
  return <usize>(((<u64>nTokens << 2) + 7) & ~7);
}

// @ts-ignore: decorator
@inline function entryBytes(nTokens: i32, nBlocks: i32): u64 {
  return <u64>tokenBytes(nTokens) + (<u64>nBlocks << 4);
}

// @ts-ignore: decorator
@inline function live(e: usize): bool {
  return load<i32>(e, 36) > 0 && load<u64>(e, 16) + ringBytes >= writePos;
}

// @ts-ignore: decorator
@inline function at(pos: u64): usize {
  return ring + <usize>(pos % ringBytes);
}

// @ts-ignore: decorator
@inline function slotOf(key: u64, p: i32): usize {
  const h = (key ^ (<u64>p * 0x9E3779B97F4A7C15)) * 0xBF58476D1CE4E5B9;
  return dir + (<usize>((h >> 32) & dirMask) << 2);
}

/** Tokens the two arrays share from the start, up to `n`. */
function commonPrefix(a: usize, b: usize, n: i32): i32 {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    // 16 tokens per step, one branch: the compare runs at close to copy speed.
    while (i + 16 <= n) {
      const pa = a + (<usize>i << 2), pb = b + (<usize>i << 2);
      const eq = v128.and(
        v128.and(i32x4.eq(v128.load(pa), v128.load(pb)), i32x4.eq(v128.load(pa, 16), v128.load(pb, 16))),
        v128.and(i32x4.eq(v128.load(pa, 32), v128.load(pb, 32)), i32x4.eq(v128.load(pa, 48), v128.load(pb, 48))));
      if (!i32x4.all_true(eq)) break;
      i += 16;
    }
  } else {
    while (i + 8 <= n) {
      const pa = a + (<usize>i << 2), pb = b + (<usize>i << 2);
      if (((load<u64>(pa) ^ load<u64>(pb)) | (load<u64>(pa, 8) ^ load<u64>(pb, 8)) |
           (load<u64>(pa, 16) ^ load<u64>(pb, 16)) | (load<u64>(pa, 24) ^ load<u64>(pb, 24))) != 0) break;
      i += 8;
    }
  }
  while (i < n && load<u32>(a + (<usize>i << 2)) == load<u32>(b + (<usize>i << 2))) i++;
  return i;
}

/** Complete blocks whose hash window (blockSize tokens, one more with Eagle) lies inside the first `tokens` tokens. */
// @ts-ignore: decorator
@inline function blocksWithin(tokens: i32, blockSize: i32, eagle: bool): i32 {
  return eagle ? (tokens > 0 ? (tokens - 1) / blockSize : 0) : tokens / blockSize;
}

/** The entry filed under (key, p) for this seed, block size and flags, or -1. */
function lookup(key: u64, p: i32, seed: u64, blockSize: i32, flags: i32): i32 {
  const i = load<i32>(slotOf(key, p)) - 1;
  if (i < 0) return -1;
  const e = entries + <usize>i * ENTRY;
  if (!live(e) || load<u64>(e, 8) != seed || load<i32>(e, 32) != blockSize || load<i32>(e, 44) != flags) return -1;
  const filed = p == 0 ? load<u64>(e) == key : load<i32>(e, 56) == p && load<u64>(e, 48) == key;
  return filed ? i : -1;
}

/**
 * Copies into `local`/`seq` the hashes of the longest prefix a remembered prompt shares with this one. `local`
 * already holds this prompt's local hashes at the key positions (0, 1, 3, 7, … below `n`). Deeper keys are tried
 * first: an entry sharing more blocks is filed under a deeper one. Returns how many leading blocks are now hashed
 * (at least 1).
 */
export function memoReuse(tokens: usize, nTokens: i32, n: i32, blockSize: i32, seed: u64, flags: i32, eagle: bool,
  local: usize, seq: usize): i32 {
  best = -1;
  bestTokens = 0;
  bestBlocks = 0;
  for (let p = deepestKeyPosition(n); ; p = (p - 1) >> 1) {
    const i = lookup(load<u64>(local + (<usize>p << 3)), p, seed, blockSize, flags);
    if (i >= 0 && i != best) {
      const e = entries + <usize>i * ENTRY;
      const common = commonPrefix(tokens, at(load<u64>(e, 16)), min(nTokens, load<i32>(e, 36)));
      const blocks = min(min(blocksWithin(common, blockSize, eagle), n), load<i32>(e, 40));
      if (best < 0 || blocks > bestBlocks || (blocks == bestBlocks && common > bestTokens)) {
        best = i;
        bestTokens = common;
        bestBlocks = blocks;
      }
      // A shallower key cannot name an entry sharing more blocks than one that already reaches past this position.
      if (bestBlocks > p) break;
    }
    if (p == 0) break;
  }
  if (best < 0 || bestBlocks <= 1) return 1;
  const e = entries + <usize>best * ENTRY;
  const base = at(load<u64>(e, 16)), eb = load<i32>(e, 40);
  const hashes = base + tokenBytes(load<i32>(e, 36));
  memory.copy(local + 8, hashes + 8, <usize>(bestBlocks - 1) << 3);
  memory.copy(seq, hashes + (<usize>eb << 3), <usize>bestBlocks << 3);
  return bestBlocks;
}

/**
 * Remembers this prompt (after `memoReuse` and hashing) when it adds complete blocks to what the memo holds and it
 * is not new (a remembered prompt shares its first blocks, or its block-0 key was seen before): it replaces the
 * entry it extends, else the least recently used one. A prompt the memo already covers only refreshes it.
 */
export function memoKeep(tokens: usize, nTokens: i32, n: i32, blockSize: i32, seed: u64, flags: i32,
  local: usize, seq: usize): void {
  clock++;
  const reused = max(bestBlocks, 1) - 1;
  const cr = counters + (<usize>C_MEMO_REUSED << 2), ch = counters + (<usize>C_MEMO_HASHED << 2);
  store<u32>(cr, load<u32>(cr) + <u32>reused);
  store<u32>(ch, load<u32>(ch) + <u32>(n - reused));
  if (best >= 0 && bestBlocks >= n) {
    store<u64>(entries + <usize>best * ENTRY, clock, 24);
    return;
  }
  const key = load<u64>(local);
  // Shares no block with what the memo holds (a deep key can match by coincidence): new unless seen before.
  if (bestBlocks == 0) {
    const slot = seen + (<usize>((key ^ (key >> 29)) & seenMask) << 3);
    if (load<u64>(slot) != key) {
      store<u64>(slot, key);
      return;
    }
  }
  const size = entryBytes(nTokens, n);
  if (size > ringBytes) return;
  let victim = -1;
  if (best >= 0 && bestTokens == load<i32>(entries + <usize>best * ENTRY, 36)) victim = best;
  else {
    let oldest: u64 = u64.MAX_VALUE;
    for (let i = 0; i < entryCount; i++) {
      const e = entries + <usize>i * ENTRY;
      if (!live(e)) { victim = i; break; }
      const used = load<u64>(e, 24);
      if (used < oldest) { oldest = used; victim = i; }
    }
  }
  let phys = writePos % ringBytes;
  if (phys + size > ringBytes) {
    writePos += ringBytes - phys;
    phys = 0;
  }
  const pos = writePos;
  writePos += size;
  const dst = ring + <usize>phys;
  memory.copy(dst, tokens, <usize>nTokens << 2);
  const hashes = dst + tokenBytes(nTokens);
  memory.copy(hashes, local, <usize>n << 3);
  memory.copy(hashes + (<usize>n << 3), seq, <usize>n << 3);
  const deep = deepestKeyPosition(n);
  const e = entries + <usize>victim * ENTRY;
  store<u64>(e, key);
  store<u64>(e, seed, 8);
  store<u64>(e, pos, 16);
  store<u64>(e, clock, 24);
  store<i32>(e, blockSize, 32);
  store<i32>(e, nTokens, 36);
  store<i32>(e, n, 40);
  store<i32>(e, flags, 44);
  store<u64>(e, load<u64>(local + (<usize>deep << 3)), 48);
  store<i32>(e, deep, 56);
  store<i32>(slotOf(key, 0), victim + 1);
  if (deep > 0) store<i32>(slotOf(load<u64>(local + (<usize>deep << 3)), deep), victim + 1);
}
