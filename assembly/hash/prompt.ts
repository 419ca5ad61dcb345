// Whole-prompt block hashing (local + chained sequence hashes) in one call, so JS never crosses into WASM per block.
import { xxh3, xxh3Pair, xxh3At64, xxh3At64Simd, prepareKeys64, KEYS64 } from "./xxh3";
import { E_BAD_ARG, E_TOO_LONG } from "../abi";

/** The chain seed of the sequence hash; LoRA and namespace salts change only the local-hash seed. */
export const CHAIN_SEED: u64 = 1337;
export const MAX_BLOCK_SIZE: i32 = 8192;

/** Bit 0 of `flags`: Eagle windows (block plus the first token of the next block). */
export const FLAG_EAGLE: i32 = 1;

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
  let k = 0;
  let prev: u64 = 0;
  if (window == 64 && stride == 64 && nMm == 0) {
    prepareKeys64(seed);
    if (ASC_FEATURE_SIMD) {
      const k0 = v128.load(KEYS64), k1 = v128.load(KEYS64, 16), k2 = v128.load(KEYS64, 32), k3 = v128.load(KEYS64, 48);
      for (let i = 0; i < n; i++) {
        const h = xxh3At64Simd(tokens + (<usize>i << 6), k0, k1, k2, k3);
        store<u64>(local + (<usize>i << 3), h);
        prev = i == 0 ? h : xxh3Pair(prev, h, CHAIN_SEED);
        store<u64>(seq + (<usize>i << 3), prev);
      }
      return n;
    }
    for (let i = 0; i < n; i++) {
      const h = xxh3At64(tokens + (<usize>i << 6));
      store<u64>(local + (<usize>i << 3), h);
      prev = i == 0 ? h : xxh3Pair(prev, h, CHAIN_SEED);
      store<u64>(seq + (<usize>i << 3), prev);
    }
    return n;
  }
  for (let i = 0; i < n; i++) {
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
  return n;
}

/** Local hashes only, for engine events that carry token ids (no chaining: events carry their own parents). */
export function hashBlocks(tokens: usize, nBlocks: i32, blockSize: i32, seed: u64, out: usize): void {
  const stride = <usize>blockSize << 2;
  for (let i = 0; i < nBlocks; i++) store<u64>(out + (<usize>i << 3), xxh3(tokens + <usize>i * stride, stride, seed));
}
