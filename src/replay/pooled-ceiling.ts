/**
 * @module The ceiling a replay's hit rates are read against: what one LRU prefix cache holding the whole fleet's KV
 * blocks would hit on the same requests: what a router spreading them over separate LRU caches should reach. Not a
 * strict bound: LRU is not the best eviction, and placement that keeps a worker's cache for prompts that recur can
 * beat one pooled LRU by a few percent on a capacity-bound trace.
 */
import type { ReplayRequest } from "./replay-request.ts";
import { promptTokens } from "./synthetic-tokens.ts";

export interface PooledCeiling {
  /** Cached prompt tokens / prompt tokens of the pooled cache, in arrival order. */
  hitRate: number;
  /** The pooled cache's size: every engine's blocks together. */
  blocks: number;
  blockSize: number;
}

/**
 * Requests in arrival order against one LRU of `blocks` blocks. A block is keyed by its whole prefix (a chained hash
 * of every token up to its end), as engines key prefix-cache blocks; a request hits its leading blocks that are
 * cached, counts complete blocks only, then holds all of its complete blocks (most recent last). Idealised on
 * purpose: no concurrency, no decode blocks, no eviction of blocks in use, so it bounds what a router can reach.
 */
export function pooledLruCeiling(requests: readonly ReplayRequest[], blockSize: number, blocks: number): PooledCeiling {
  const lru = new Map<number, true>();
  let cached = 0, prompt = 0;
  for (const req of requests) {
    const keys = blockKeys(req, blockSize);
    let hit = 0;
    while (hit < keys.length && lru.has(keys[hit]!)) hit++;
    cached += hit * blockSize;
    prompt += req.inputLength;
    for (const k of keys) {
      lru.delete(k);
      lru.set(k, true);
    }
    // Map iterates in insertion order: the first key is the least recently used.
    while (lru.size > blocks) lru.delete(lru.keys().next().value!);
  }
  return { hitRate: prompt > 0 ? cached / prompt : 0, blocks, blockSize };
}

/**
 * One key per complete block of the prompt the replay sends: two 32-bit lanes chained over its tokens, folded into
 * a safe integer (53 bits: a collision among a replay's blocks is vanishingly unlikely).
 */
export function blockKeys(req: ReplayRequest, blockSize: number): number[] {
  const tokens = promptTokens(req);
  const keys: number[] = [];
  let a = 0x9e3779b9, b = 0x85ebca6b;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    a = Math.imul(a ^ t, 0x01000193) >>> 0;
    b = Math.imul((b + t) ^ (b >>> 15), 0x2c1b3c6d) >>> 0;
    if ((i + 1) % blockSize === 0) keys.push((a & 0x1fffff) * 0x100000000 + b);
  }
  return keys;
}
