/** @module One request inside the simulated engine: its tokens, the KV blocks it holds, and its progress and times. */
import type { BlockHashes, BlockHasher, HashSalt } from "./block-hasher.ts";

export type SequenceStatus = "waiting" | "running" | "finished";

export class SimSequence {
  /** Prompt followed by the tokens generated so far. */
  readonly tokens: number[];
  readonly promptLen: number;
  /** Hashes of the complete blocks of `tokens` computed so far (index = block position). */
  readonly hashes: BlockHashes[];
  /** KV blocks held, in position order. */
  blockIds: number[] = [];
  /** Leading blocks registered in the prefix cache (hits and commits). */
  committed = 0;
  /** Tokens whose KV is (being) computed; advanced when a step is scheduled, as vLLM does. */
  numComputed = 0;
  /** Prompt tokens served from the prefix cache (or a KV transfer) at the first admission; -1 before it. */
  cachedTokens = -1;
  /** Leading prompt tokens whose KV arrived from a remote prefill; used by the first admission only. */
  externalTokens = 0;
  status: SequenceStatus = "waiting";
  preemptions = 0;
  firstTokenAt: number | undefined;
  lastTokenAt: number | undefined;

  constructor(
    readonly id: string,
    prompt: ArrayLike<number>,
    readonly maxTokens: number,
    readonly arrival: number,
    promptHashes: BlockHashes[],
    /** Adapter and cache_salt: they key its blocks, so no other adapter or tenant shares them. */
    readonly salt: HashSalt = {},
  ) {
    this.tokens = Array.from(prompt);
    this.promptLen = prompt.length;
    this.hashes = promptHashes;
  }

  get outputLen(): number {
    return this.tokens.length - this.promptLen;
  }

  /** Tokens still to compute before the next token can be sampled. */
  get pending(): number {
    return this.tokens.length - this.numComputed;
  }

  /** Makes sure the hashes of the first `blocks` complete blocks are known (generated tokens are hashed lazily). */
  ensureHashes(blocks: number, hasher: BlockHasher): void {
    const bs = hasher.blockSize;
    for (let i = this.hashes.length; i < blocks; i++) {
      const parent = i === 0 ? null : this.hashes[i - 1]!.seq;
      this.hashes.push(hasher.nextBlock(parent, this.tokens.slice(i * bs, (i + 1) * bs), this.salt));
    }
  }
}
