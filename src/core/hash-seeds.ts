/** @module Local-hash seeds: LoRA adapters and cache namespaces salt the block hashes by changing the XXH3 seed. */

/** Seed of every local and chain hash when no salt applies. */
export const BASE_SEED = 1337n;

export interface HashOptions {
  /** Tokens per KV block; must equal the engine's. */
  blockSize: number;
  /** LoRA adapter name; empty means none. */
  lora?: string;
  /** Cache namespace (tenant isolation); empty means none. */
  namespace?: string;
  /** Eagle speculative decoding: each block hash also covers the next block's first token. */
  eagle?: boolean;
  /**
   * false: bypass the core's prompt memo (KvIndexOptions.promptMemoEntries), neither reusing a remembered prompt's
   * hashes nor remembering this one. The hashes are the same either way.
   */
  memo?: boolean;
  /** Multimodal object hashes, appended (sorted) to the bytes of the block they fall in. */
  multimodal?: readonly { block: number; hash: bigint }[];
}

const MAX_CACHED = 1024;
const BASE_PARTS = [Number(BASE_SEED), 0] as const;
const encoder = new TextEncoder();

/**
 * seed = 1337 + xxh3(lora, 0) + xxh3(namespace, 1), wrapping at 2^64. The namespace uses inner seed 1 so that
 * namespace "x" and LoRA "x" differ. Results are cached; the cache is bounded and simply reset when full.
 */
export class HashSeeds {
  readonly #cache = new Map<string, bigint>();
  readonly #parts = new Map<string, readonly [number, number]>();

  constructor(private readonly xxh3: (bytes: Uint8Array, seed: bigint) => bigint) {}

  /** The seed as (low, high) signed 32-bit halves, the form the core takes; cached so the hot path does no BigInt work. */
  parts(lora?: string, namespace?: string): readonly [number, number] {
    if (!lora && !namespace) return BASE_PARTS;
    const key = `${lora ?? ""}\u0000${namespace ?? ""}`;
    let p = this.#parts.get(key);
    if (!p) {
      const s = this.seed(lora, namespace);
      p = [Number(s & 0xffffffffn) | 0, Number(s >> 32n) | 0];
      if (this.#parts.size >= MAX_CACHED) this.#parts.clear();
      this.#parts.set(key, p);
    }
    return p;
  }

  seed(lora?: string, namespace?: string): bigint {
    if (!lora && !namespace) return BASE_SEED;
    const key = `${lora ?? ""}\u0000${namespace ?? ""}`;
    const hit = this.#cache.get(key);
    if (hit !== undefined) return hit;
    let s = BASE_SEED;
    if (lora) s += this.xxh3(encoder.encode(lora), 0n);
    if (namespace) s += this.xxh3(encoder.encode(namespace), 1n);
    s = BigInt.asUintN(64, s);
    if (this.#cache.size >= MAX_CACHED) this.#cache.clear();
    this.#cache.set(key, s);
    return s;
  }
}
