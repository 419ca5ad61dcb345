/**
 * @module The simulated engine's paged KV cache: N blocks, reference counts, a prefix cache keyed by sequence hash,
 * and LRU eviction of unreferenced cached blocks. It also produces the KV events a consumer needs to mirror its
 * contents exactly: BlockStored when a block is registered, BlockRemoved when one is evicted, AllBlocksCleared.
 *
 * Choices (each mirrors vLLM V1 or the Dynamo mocker):
 * - A block that is freed keeps its hash and stays reusable until evicted; only eviction emits BlockRemoved.
 * - Blocks are released deepest first, so a finished request's suffix is evicted before its (shared) prefix,
 *   and a cached block's ancestors are always evicted after it.
 * - Never-hashed free blocks (partial blocks, blocks of a request that stopped mid-block) are used before any
 *   cached block is evicted.
 * - When a block fills up with content the cache already holds, the sequence switches to the existing block and
 *   gives its own back ("collapse", as the mocker does), so one hash never names two blocks.
 */
import { KvgateError } from "../core/errors.ts";
import type { BlockHashes, HashSalt } from "./block-hasher.ts";
import { BlockLru } from "./block-lru.ts";
import { ALL_BLOCKS_CLEARED, blockRemoved, blockStored, type KvCacheEvent } from "./kv-events.ts";

export interface CommitBlock {
  /** The block the sequence holds at this position. */
  id: number;
  hashes: BlockHashes;
  /** Its `blockSize` token ids. */
  tokens: ArrayLike<number>;
}

export interface KvCacheStats {
  stored: number;
  evicted: number;
  collapsed: number;
}

export class KvCache {
  readonly #ref: Int32Array;
  /** Sequence hash a block is registered under (undefined: not in the prefix cache). */
  readonly #hash: (bigint | undefined)[];
  /** Free blocks without a hash; a stack. */
  readonly #empty: number[] = [];
  /** Free blocks with a hash, least recently freed first. */
  readonly #lru: BlockLru;
  readonly #byHash = new Map<bigint, number>();
  #events: KvCacheEvent[] = [];
  readonly stats: KvCacheStats = { stored: 0, evicted: 0, collapsed: 0 };

  constructor(readonly numBlocks: number, readonly blockSize: number, readonly prefixCaching = true) {
    this.#ref = new Int32Array(numBlocks);
    this.#lru = new BlockLru(numBlocks);
    this.#hash = new Array(numBlocks).fill(undefined);
    for (let i = numBlocks - 1; i >= 0; i--) this.#empty.push(i);
  }

  /** Blocks a request can still get: never-hashed ones plus evictable cached ones. */
  get freeBlocks(): number {
    return this.#empty.length + this.#lru.size;
  }

  /** Blocks referenced by at least one sequence. */
  get usedBlocks(): number {
    return this.numBlocks - this.freeBlocks;
  }

  /** Blocks in the prefix cache, referenced or not. */
  get cachedBlocks(): number {
    return this.#byHash.size;
  }

  /** Share of blocks in use, 0..1 (vLLM's kv_cache_usage_perc). */
  usage(): number {
    return this.usedBlocks / this.numBlocks;
  }

  refCount(id: number): number {
    return this.#ref[id]!;
  }

  /** The block registered under a sequence hash. */
  lookup(seq: bigint): number | undefined {
    return this.#byHash.get(seq);
  }

  /** Ids of the leading blocks of `hashes` the prefix cache holds, at most `max` of them. */
  matchPrefix(hashes: readonly BlockHashes[], max: number): number[] {
    const ids: number[] = [];
    if (!this.prefixCaching) return ids;
    const n = Math.min(max, hashes.length);
    for (let i = 0; i < n; i++) {
      const id = this.#byHash.get(hashes[i]!.seq);
      if (id === undefined) break;
      ids.push(id);
    }
    return ids;
  }

  /** Whether `fresh` new blocks can be had after taking references on `reuse` (which then cannot be evicted). */
  canAllocate(fresh: number, reuse: readonly number[] = []): boolean {
    let pinned = 0;
    for (const id of reuse) if (this.#ref[id] === 0) pinned++;
    return fresh <= this.freeBlocks - pinned;
  }

  /** Takes one reference on each block (prefix hits); a free cached block leaves the eviction order. */
  acquire(ids: readonly number[]): void {
    for (const id of ids) {
      if (this.#hash[id] === undefined) throw new KvgateError("KVGATE_ERR_STATE", `block ${id} is not cached`);
      if (this.#ref[id] === 0) this.#lru.delete(id);
      this.#ref[id]!++;
    }
  }

  /** `n` blocks referenced once; evicts least recently freed cached blocks when no empty block is left. */
  allocate(n: number): number[] {
    if (n > this.freeBlocks) throw new KvgateError("KVGATE_ERR_CAPACITY", `need ${n} KV blocks, ${this.freeBlocks} free`);
    const ids: number[] = [];
    for (let i = 0; i < n; i++) {
      const id = this.#empty.pop() ?? this.#evictOldest();
      this.#ref[id] = 1;
      ids.push(id);
    }
    return ids;
  }

  #evictOldest(): number {
    const id = this.#lru.shift()!;
    const hash = this.#hash[id]!;
    this.#byHash.delete(hash);
    this.#hash[id] = undefined;
    this.stats.evicted++;
    const last = this.#events[this.#events.length - 1];
    // Consecutive removals travel as one event, as vLLM's consumers (and Dynamo's publisher) merge them anyway.
    if (last?.type === "BlockRemoved") last.block_hashes.push(hash);
    else this.#events.push(blockRemoved([hash]));
    return id;
  }

  /**
   * Registers a sequence's newly full blocks, in order, under their hashes. `parent` is the sequence hash of the
   * block before the first one (null at the root). Returns the ids the sequence holds afterwards (a block whose
   * content is already cached is swapped for the cached one).
   */
  commit(parent: bigint | null, blocks: readonly CommitBlock[], salt: HashSalt = {}): number[] {
    const ids = blocks.map((b) => b.id);
    if (!this.prefixCaching) return ids;
    let runParent = parent;
    let run: { hashes: bigint[]; tokens: number[] } = { hashes: [], tokens: [] };
    const flush = (): void => {
      if (run.hashes.length > 0) this.#events.push(blockStored(runParent, run.hashes, run.tokens, this.blockSize, salt));
      run = { hashes: [], tokens: [] };
    };
    let prev = parent;
    blocks.forEach((b, i) => {
      if (this.#hash[b.id] !== undefined || this.#ref[b.id] !== 1) {
        throw new KvgateError("KVGATE_ERR_STATE", `block ${b.id} cannot be committed (ref ${this.#ref[b.id]}, hashed ${this.#hash[b.id] !== undefined})`);
      }
      const seq = b.hashes.seq;
      const existing = this.#byHash.get(seq);
      if (existing !== undefined) {
        flush();
        this.acquire([existing]);
        this.#ref[b.id] = 0;
        this.#empty.push(b.id);
        ids[i] = existing;
        this.stats.collapsed++;
      } else {
        if (run.hashes.length === 0) runParent = prev;
        this.#hash[b.id] = seq;
        this.#byHash.set(seq, b.id);
        run.hashes.push(seq);
        for (let k = 0; k < b.tokens.length; k++) run.tokens.push(b.tokens[k]!);
        this.stats.stored++;
      }
      prev = seq;
    });
    flush();
    return ids;
  }

  /** Drops one reference on each block of a sequence (given in sequence order), deepest block first. */
  release(ids: readonly number[]): void {
    for (let i = ids.length - 1; i >= 0; i--) {
      const id = ids[i]!;
      if (this.#ref[id]! <= 0) throw new KvgateError("KVGATE_ERR_STATE", `block ${id} released while free`);
      if (--this.#ref[id]! > 0) continue;
      if (this.#hash[id] !== undefined) this.#lru.append(id);
      else this.#empty.push(id);
    }
  }

  /** vLLM's reset_prefix_cache: forgets every cached block and emits AllBlocksCleared; refused while any is in use. */
  reset(): boolean {
    if (this.usedBlocks > 0) return false;
    for (const id of this.#lru.keys()) {
      this.#hash[id] = undefined;
      this.#empty.push(id);
    }
    this.#lru.clear();
    this.#byHash.clear();
    this.#events.push(ALL_BLOCKS_CLEARED);
    return true;
  }

  /**
   * Fault injection: the engine restarted (or its event stream was cut) and nobody was told. Every cached block is
   * forgotten, in use or not, and no event says so; running sequences keep their blocks but can no longer share them.
   */
  loseSilently(): number {
    const lost = this.#byHash.size;
    for (const id of this.#lru.keys()) {
      this.#hash[id] = undefined;
      this.#empty.push(id);
    }
    this.#lru.clear();
    for (const id of this.#byHash.values()) this.#hash[id] = undefined;
    this.#byHash.clear();
    return lost;
  }

  /** Events produced since the last call, in order. */
  drainEvents(): KvCacheEvent[] {
    const out = this.#events;
    this.#events = [];
    return out;
  }

  /** Events produced but not yet drained (the engine publishes them when the running step ends). */
  peekEvents(): readonly KvCacheEvent[] {
    return this.#events;
  }

  /** Every sequence hash in the prefix cache. */
  cachedHashes(): Set<bigint> {
    return new Set(this.#byHash.keys());
  }

  /** Sequence hashes of free cached blocks, next to be evicted first. */
  evictionOrder(): bigint[] {
    return [...this.#lru.keys()].map((id) => this.#hash[id]!);
  }

  /** Internal consistency problems (empty when sound); tests call it after random workloads. */
  audit(): string[] {
    const problems: string[] = [];
    const empty = new Set(this.#empty);
    if (empty.size !== this.#empty.length) problems.push("a block is twice in the empty list");
    for (let id = 0; id < this.numBlocks; id++) {
      const ref = this.#ref[id]!, h = this.#hash[id], inLru = this.#lru.has(id), inEmpty = empty.has(id);
      if (ref < 0) problems.push(`block ${id} has ref ${ref}`);
      if (ref > 0 && (inLru || inEmpty)) problems.push(`block ${id} is referenced and free`);
      if (ref === 0 && h !== undefined && !inLru) problems.push(`free cached block ${id} is not in the LRU`);
      if (ref === 0 && h === undefined && !inEmpty) problems.push(`free block ${id} is lost`);
      if (h !== undefined && this.#byHash.get(h) !== id) problems.push(`block ${id} hash not mapped back`);
    }
    if (this.#byHash.size !== this.#hash.filter((h) => h !== undefined).length) problems.push("hash map size mismatch");
    return problems;
  }
}
