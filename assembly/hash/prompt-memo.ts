// Recent prompts with their block hashes, so a prompt that repeats or extends one (the next turn of a conversation,
// a shared system prompt) compares its tokens instead of hashing them: comparing is ~10× cheaper than XXH3 per byte.
// Exact by construction: hashes are reused only for blocks whose whole window matches token for token.
import { reserve } from "../memory";
import { E_BAD_ARG, E_NO_MEMORY, E_STATE, OK, C_MEMO_REUSED, C_MEMO_HASHED } from "../abi";

// Keys (local hash of block 0) sit in their own dense array so a lookup scans 8 bytes per entry.
// Entry record (ENTRY bytes): unused u64, seed u64, ring position u64, last use u64,
// tokens i32, blocks i32, block size i32, flags i32.
const ENTRY: usize = 48;
const MAX_ENTRIES: i32 = 4096;

let keys: usize = 0, entries: usize = 0, entryCount = 0;
let ring: usize = 0, ringBytes: u64 = 0;
let writePos: u64 = 0, clock: u64 = 0;
let counters: usize = 0;
// Doorkeeper: block-0 keys seen once, direct-mapped. A prompt is remembered only when its key was seen before (or a
// remembered prompt shares it), so one-off prompts cost a probe instead of a copy into the ring and evict nothing.
let seen: usize = 0, seenMask: u64 = 0;
// The lookup's choice, kept for `memoKeep` of the same prompt.
let best = -1, bestTokens = 0, bestBlocks = 0, sameKey = 0, sameOldest = -1;
const SAME_KEY_MAX = 8;

/** Reserves the memo: `count` entries over a ring of `bytes` (0 and 0: off). Once per instance. */
export function memoInit(count: i32, bytes: i32, countersAt: usize): i32 {
  if (entries != 0) return E_STATE;
  if (count < 0 || count > MAX_ENTRIES || bytes < 0 || (count == 0) != (bytes == 0)) return E_BAD_ARG;
  if (count == 0) return OK;
  let seenSlots: u32 = 1024;
  while (seenSlots < <u32>count * 16) seenSlots <<= 1;
  // Keys padded to a multiple of 4 for the vector scan; padding keys stay 0 and their entries never live.
  const k = reserve(<usize>((count + 3) & ~3) << 3), e = reserve(<usize>((count + 3) & ~3) * ENTRY), r = reserve(<usize>bytes & ~7);
  const d = reserve(<usize>seenSlots << 3);
  if (k == 0 || e == 0 || r == 0 || d == 0) return E_NO_MEMORY;
  seen = d;
  seenMask = <u64>(seenSlots - 1);
  keys = k;
  counters = countersAt;
  entries = e;
  entryCount = count;
  ring = r;
  ringBytes = <u64>(bytes & ~7);
  return OK;
}

export function memoEnabled(): bool {
  return entryCount > 0;
}

// @ts-ignore: decorator
@inline function entryBytes(nTokens: i32, nBlocks: i32): u64 {
  return ((<u64>nTokens << 2) + 7 & ~7) + (<u64>nBlocks << 4);
}

// @ts-ignore: decorator
@inline function live(e: usize): bool {
  return load<i32>(e, 36) > 0 && load<u64>(e, 16) + ringBytes >= writePos;
}

// @ts-ignore: decorator
@inline function at(pos: u64): usize {
  return ring + <usize>(pos % ringBytes);
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

/**
 * Copies into `local`/`seq` the hashes of the longest prefix a remembered prompt shares with this one (block 0's
 * local hash, already in `local`, is the key). Returns how many leading blocks are now hashed (at least 1).
 *
 * Full token compares are bounded: an entry is compared only if it passes a two-token probe (its last shared token
 * and the middle one match, as when this prompt repeats or extends it) and could beat the best so far; when none
 * passes, the most recently used entry of the key is compared (its shared system prompt, say). Entries per key are
 * capped (SAME_KEY_MAX), so a popular system prompt cannot turn a lookup into a scan of the whole ring.
 */
export function memoReuse(tokens: usize, nTokens: i32, n: i32, blockSize: i32, seed: u64, flags: i32, eagle: bool,
  local: usize, seq: usize): i32 {
  best = -1;
  bestTokens = 0;
  bestBlocks = 0;
  sameKey = 0;
  sameOldest = -1;
  let oldest: u64 = u64.MAX_VALUE, recent = -1, recentUsed: u64 = 0, recentProbed = false;
  const key = load<u64>(local);
  for (let i = nextKey(0, key); i < entryCount; i = nextKey(i + 1, key)) {
    const e = entries + <usize>i * ENTRY;
    if (load<u64>(e, 8) != seed || load<i32>(e, 32) != blockSize || load<i32>(e, 44) != flags || !live(e)) continue;
    sameKey++;
    const used = load<u64>(e, 24);
    if (used < oldest) { oldest = used; sameOldest = i; }
    const m = min(nTokens, load<i32>(e, 36));
    const base = at(load<u64>(e, 16));
    const last = <usize>(m - 1) << 2, mid = <usize>((m - 1) >> 1) << 2;
    const probed = load<u32>(tokens + last) == load<u32>(base + last) && load<u32>(tokens + mid) == load<u32>(base + mid);
    if (used >= recentUsed) { recentUsed = used; recent = i; recentProbed = probed; }
    if (!probed || min(min(blocksWithin(m, blockSize, eagle), n), load<i32>(e, 40)) <= bestBlocks) continue;
    consider(i, tokens, nTokens, n, blockSize, eagle);
  }
  if (bestBlocks <= 1 && recent >= 0 && !recentProbed) consider(recent, tokens, nTokens, n, blockSize, eagle);
  if (best < 0 || bestBlocks <= 1) return 1;
  const e = entries + <usize>best * ENTRY;
  const base = at(load<u64>(e, 16)), eb = load<i32>(e, 40);
  const hashes = base + <usize>(((<u64>load<i32>(e, 36) << 2) + 7) & ~7);
  memory.copy(local + 8, hashes + 8, <usize>(bestBlocks - 1) << 3);
  memory.copy(seq, hashes + (<usize>eb << 3), <usize>bestBlocks << 3);
  return bestBlocks;
}

/** The first entry at or after `i` whose key is `key`, or entryCount. */
function nextKey(i: i32, key: u64): i32 {
  if (ASC_FEATURE_SIMD) {
    // Four keys per step until the group holding a match.
    while ((i & 3) != 0 && i < entryCount) {
      if (load<u64>(keys + (<usize>i << 3)) == key) return i;
      i++;
    }
    const kv = i64x2.splat(key);
    while (i < entryCount) {
      const p = keys + (<usize>i << 3);
      if (v128.any_true(v128.or(i64x2.eq(v128.load(p), kv), i64x2.eq(v128.load(p, 16), kv)))) break;
      i += 4;
    }
  }
  while (i < entryCount && load<u64>(keys + (<usize>i << 3)) != key) i++;
  return i;
}

/** Compares entry `i` token by token and makes it the best if it shares more complete blocks. */
function consider(i: i32, tokens: usize, nTokens: i32, n: i32, blockSize: i32, eagle: bool): void {
  const e = entries + <usize>i * ENTRY;
  const common = commonPrefix(tokens, at(load<u64>(e, 16)), min(nTokens, load<i32>(e, 36)));
  const blocks = min(min(blocksWithin(common, blockSize, eagle), n), load<i32>(e, 40));
  if (best < 0 || blocks > bestBlocks || (blocks == bestBlocks && common > bestTokens)) {
    best = i;
    bestTokens = common;
    bestBlocks = blocks;
  }
}

/**
 * Remembers this prompt (after `memoReuse` and hashing) when it adds complete blocks to what the memo holds and its
 * block-0 key is not new: it replaces the entry it extends, else the least recently used one. A prompt the memo
 * already covers only refreshes it.
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
  if (sameKey == 0) {
    const key = load<u64>(local);
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
  else if (sameKey >= SAME_KEY_MAX) victim = sameOldest;
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
  const hashes = dst + <usize>(((<u64>nTokens << 2) + 7) & ~7);
  memory.copy(hashes, local, <usize>n << 3);
  memory.copy(hashes + (<usize>n << 3), seq, <usize>n << 3);
  const e = entries + <usize>victim * ENTRY;
  store<u64>(keys + (<usize>victim << 3), load<u64>(local));
  store<u64>(e, seed, 8);
  store<u64>(e, pos, 16);
  store<u64>(e, clock, 24);
  store<i32>(e, blockSize, 32);
  store<i32>(e, nTokens, 36);
  store<i32>(e, n, 40);
  store<i32>(e, flags, 44);
}
