// Whole-prompt block hashing (local + chained sequence hashes) in one call, so JS never crosses into WASM per block.
import { xxh3, xxh3Pair, xxh3At64, xxh3At64Simd, prepareKeys64, KEYS64, seededSecret, hashUpTo1k } from "./xxh3";
import { E_BAD_ARG, E_TOO_LONG } from "../abi";
import { memoEnabled, memoReuse, memoKeep, nextKeyPosition } from "./prompt-memo";

/** The chain seed of the sequence hash; LoRA and namespace salts change only the local-hash seed. */
export const CHAIN_SEED: u64 = 1337;
export const MAX_BLOCK_SIZE: i32 = 8192;

/** Bit 0 of `flags`: Eagle windows (block plus the first token of the next block). */
export const FLAG_EAGLE: i32 = 1;
/** Bit 1: bypass the prompt memo (neither reuse nor remember), for prompts the host knows are one-offs. */
export const FLAG_NO_MEMO: i32 = 2;

// Multimodal input: records of 16 bytes (block index u32, pad u32, mm hash u64), sorted by (block, hash).
/**
 * Hashes `nTokens` u32 tokens at `tokens` into `local` and `seq` (u64 each). Returns the number of complete
 * blocks, or a negative status. `scratch` must hold (blockSize + 1) * 4 + 8 * nMm bytes.
 */
export function hashPrompt(
  tokens: usize, nTokens: i32, blockSize: i32, seed: u64, flags: i32,
  mm: usize, nMm: i32, scratch: usize, local: usize, seq: usize, maxBlocks: i32,
): i32 {
  if (blockSize <= 0 || blockSize > MAX_BLOCK_SIZE || nTokens < 0 || nMm < 0) return E_BAD_ARG;
  const eagle = (flags & FLAG_EAGLE) != 0;
  const n = eagle ? (nTokens > 0 ? (nTokens - 1) / blockSize : 0) : nTokens / blockSize;
  if (n > maxBlocks) return E_TOO_LONG;
  const window = <usize>(eagle ? blockSize + 1 : blockSize) << 2;
  const stride = <usize>blockSize << 2;
  // Validate multimodal records once: sorted by (block, hash), block in range.
  for (let k = 0; k < nMm; k++) {
    const r = mm + (<usize>k << 4);
    const b = load<u32>(r);
    if (b >= <u32>n && n > 0) return E_BAD_ARG;
    if (k > 0) {
      const pb = load<u32>(r - 16);
      if (pb > b || (pb == b && load<u64>(r - 8) > load<u64>(r + 8))) return E_BAD_ARG;
    }
  }
  if (n == 0) return 0;
  if (nMm > 0 || (flags & FLAG_NO_MEMO) != 0 || !memoEnabled()) {
    hashRange(tokens, 0, n, blockSize, window, stride, seed, mm, nMm, scratch, local, seq);
    return n;
  }
  hashRange(tokens, 0, 1, blockSize, window, stride, seed, mm, 0, scratch, local, seq);
  // The memo's keys: local hashes of blocks 1, 3, 7, … (block 0's is in place; the 64-byte keys are prepared).
  for (let p = nextKeyPosition(0); p < n; p = nextKeyPosition(p)) {
    const src = tokens + <usize>p * stride;
    store<u64>(local + (<usize>p << 3), window == 64 && stride == 64 ? xxh3At64(src) : xxh3(src, window, seed));
  }
  const kind = flags & FLAG_EAGLE;
  const from = memoReuse(tokens, nTokens, n, blockSize, seed, kind, eagle, local, seq);
  hashRange(tokens, from, n, blockSize, window, stride, seed, mm, 0, scratch, local, seq);
  memoKeep(tokens, nTokens, n, blockSize, seed, kind, local, seq);
  return n;
}

/** Hashes blocks [from, to) chaining from block from − 1's sequence hash in `seq` (multimodal records validated). */
function hashRange(
  tokens: usize, from: i32, to: i32, blockSize: i32, window: usize, stride: usize, seed: u64,
  mm: usize, nMm: i32, scratch: usize, local: usize, seq: usize,
): void {
  if (from >= to) return;
  let prev: u64 = from == 0 ? 0 : load<u64>(seq + (<usize>(from - 1) << 3));
  if (window == 64 && stride == 64 && nMm == 0) {
    prepareKeys64(seed);
    if (ASC_FEATURE_SIMD) {
      const k0 = v128.load(KEYS64), k1 = v128.load(KEYS64, 16), k2 = v128.load(KEYS64, 32), k3 = v128.load(KEYS64, 48);
      for (let i = from; i < to; i++) {
        const h = xxh3At64Simd(tokens + (<usize>i << 6), k0, k1, k2, k3);
        store<u64>(local + (<usize>i << 3), h);
        prev = i == 0 ? h : xxh3Pair(prev, h, CHAIN_SEED);
        store<u64>(seq + (<usize>i << 3), prev);
      }
      return;
    }
    for (let i = from; i < to; i++) {
      const h = xxh3At64(tokens + (<usize>i << 6));
      store<u64>(local + (<usize>i << 3), h);
      prev = i == 0 ? h : xxh3Pair(prev, h, CHAIN_SEED);
      store<u64>(seq + (<usize>i << 3), prev);
    }
    return;
  }
  if (window > 240 && window <= 1024 && nMm == 0) {
    // Block sizes 61..256 tokens: one secret for the prompt, no length dispatch per block.
    const s = seededSecret(seed);
    for (let i = from; i < to; i++) {
      const h = hashUpTo1k(tokens + <usize>i * stride, window, s);
      store<u64>(local + (<usize>i << 3), h);
      prev = i == 0 ? h : xxh3Pair(prev, h, CHAIN_SEED);
      store<u64>(seq + (<usize>i << 3), prev);
    }
    return;
  }
  let k = 0;
  while (k < nMm && load<u32>(mm + (<usize>k << 4)) < <u32>from) k++;
  for (let i = from; i < to; i++) {
    const src = tokens + <usize>i * stride;
    let h: u64;
    if (k < nMm && load<u32>(mm + (<usize>k << 4)) == <u32>i) {
      memory.copy(scratch, src, window);
      let w = scratch + window;
      while (k < nMm && load<u32>(mm + (<usize>k << 4)) == <u32>i) {
        store<u64>(w, load<u64>(mm + (<usize>k << 4) + 8));
        w += 8;
        k++;
      }
      h = xxh3(scratch, w - scratch, seed);
    } else {
      h = xxh3(src, window, seed);
    }
    store<u64>(local + (<usize>i << 3), h);
    prev = i == 0 ? h : xxh3Pair(prev, h, CHAIN_SEED);
    store<u64>(seq + (<usize>i << 3), prev);
  }
}

/** Local hashes only, for engine events that carry token ids (no chaining: events carry their own parents). */
export function hashBlocks(tokens: usize, nBlocks: i32, blockSize: i32, seed: u64, out: usize): void {
  const stride = <usize>blockSize << 2;
  for (let i = 0; i < nBlocks; i++) store<u64>(out + (<usize>i << 3), xxh3(tokens + <usize>i * stride, stride, seed));
}
