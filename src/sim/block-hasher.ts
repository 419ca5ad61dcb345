/**
 * @module Block hashing for the simulated engine, shared with the router so both name a block the same way: local
 * hash = XXH3-64(tokens as u32 LE, seed 1337), sequence hash chained over the previous block's sequence hash.
 * The sim publishes the sequence hash as vLLM's `block_hashes` value (see kv-events.ts).
 */
import type { KvIndex } from "../core/kv-index.ts";
import { BASE_SEED } from "../core/hash-seeds.ts";
import { CacheSalts } from "../core/cache-salt.ts";
import { hashPromptReference } from "../reference/block-hash-reference.ts";
import { xxh3Reference } from "../reference/xxh3-reference.ts";
import { chainStep } from "../reference/index-reference.ts";

export interface BlockHashes {
  local: bigint;
  seq: bigint;
}

/** What vLLM folds into a request's block hashes besides its tokens: the LoRA adapter, and cache_salt in the first block. */
export interface HashSalt {
  lora?: string;
  cacheSalt?: string;
}

export interface BlockHasher {
  readonly blockSize: number;
  /** Hashes of every complete block of `tokens` (a trailing partial block is not hashed). */
  hashBlocks(tokens: ArrayLike<number>, salt?: HashSalt): BlockHashes[];
  /** Hashes of one complete block following the block whose sequence hash is `parent` (null at the root). */
  nextBlock(parent: bigint | null, blockTokens: ArrayLike<number>, salt?: HashSalt): BlockHashes;
}

function zip(h: { local: bigint[]; seq: bigint[] }): BlockHashes[] {
  return h.local.map((local, i) => ({ local, seq: h.seq[i]! }));
}

function checkBlock(blockTokens: ArrayLike<number>, blockSize: number): void {
  if (blockTokens.length !== blockSize) throw new RangeError(`a block holds ${blockSize} tokens, got ${blockTokens.length}`);
}

/** The WASM core's hashing (fast); one KvIndex with a single slot is enough, it is only used to hash. */
export function wasmBlockHasher(index: KvIndex, blockSize: number): BlockHasher {
  const pair = new Uint8Array(16);
  const view = new DataView(pair.buffer);
  const salts = new CacheSalts((b, seed) => index.xxh3(b, seed));
  return {
    blockSize,
    hashBlocks: (tokens, salt) => zip(index.hash(tokens, salts.options(blockSize, salt?.lora, salt?.cacheSalt))),
    nextBlock(parent, blockTokens, salt) {
      checkBlock(blockTokens, blockSize);
      const local = index.hash(blockTokens, salts.options(blockSize, salt?.lora, parent === null ? salt?.cacheSalt : undefined)).local[0]!;
      if (parent === null) return { local, seq: local };
      view.setBigUint64(0, parent, true);
      view.setBigUint64(8, local, true);
      return { local, seq: index.xxh3(pair, BASE_SEED) };
    },
  };
}

/** The BigInt reference hashing (slow, dependency-free): for tests and for checking the WASM path. */
export function referenceBlockHasher(blockSize: number): BlockHasher {
  const salts = new CacheSalts(xxh3Reference);
  return {
    blockSize,
    hashBlocks: (tokens, salt) => zip(hashPromptReference(tokens, salts.options(blockSize, salt?.lora, salt?.cacheSalt))),
    nextBlock(parent, blockTokens, salt) {
      checkBlock(blockTokens, blockSize);
      const local = hashPromptReference(blockTokens, salts.options(blockSize, salt?.lora, parent === null ? salt?.cacheSalt : undefined)).local[0]!;
      return { local, seq: parent === null ? local : chainStep(parent, local) };
    },
  };
}
