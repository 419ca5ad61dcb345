import { describe, it, expect } from "vitest";
import { KvCache, type CommitBlock } from "../../src/sim/kv-cache.ts";
import { referenceBlockHasher } from "../../src/sim/block-hasher.ts";

const BS = 4;
const hasher = referenceBlockHasher(BS);

/** `blocks` blocks of tokens: prefix p (shared) then distinct tokens tagged by `tag`. */
function tokens(shared: number, own: number, tag: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < shared * BS; i++) out.push(1000 + i);
  for (let i = 0; i < own * BS; i++) out.push(tag * 100_000 + i);
  return out;
}

/** Allocates and commits every block of `toks` (with prefix hits), like a finished prefill. */
function fill(cache: KvCache, toks: number[]): { ids: number[]; hashes: bigint[]; hits: number } {
  const h = hasher.hashBlocks(toks);
  const hits = cache.matchPrefix(h, h.length);
  cache.acquire(hits);
  const fresh = cache.allocate(h.length - hits.length);
  const blocks: CommitBlock[] = fresh.map((id, k) => {
    const i = hits.length + k;
    return { id, hashes: h[i]!, tokens: toks.slice(i * BS, (i + 1) * BS) };
  });
  const parent = hits.length > 0 ? h[hits.length - 1]!.seq : null;
  const ids = [...hits, ...cache.commit(parent, blocks)];
  return { ids, hashes: h.map((x) => x.seq), hits: hits.length };
}

describe("KvCache prefix reuse", () => {
  it("should reuse the cached blocks of a shared prefix and count references", () => {
    const cache = new KvCache(16, BS);
    const a = fill(cache, tokens(3, 1, 1));
    const b = fill(cache, tokens(3, 2, 2));
    expect(b.hits).toBe(3);
    expect(b.ids.slice(0, 3)).toEqual(a.ids.slice(0, 3));
    expect(a.ids.slice(0, 3).map((id) => cache.refCount(id))).toEqual([2, 2, 2]);
    expect(cache.usedBlocks).toBe(4 + 2);
    cache.release(a.ids);
    expect(cache.usedBlocks).toBe(5);
    const c = fill(cache, tokens(3, 1, 1));
    expect(c.hits).toBe(4); // A's own block survives its release
    expect(cache.audit()).toEqual([]);
  });

  it("should publish BlockStored with the parent, the hashes and the tokens of the new blocks only", () => {
    const cache = new KvCache(16, BS);
    const a = fill(cache, tokens(2, 0, 0));
    const b = fill(cache, tokens(2, 2, 7));
    const ev = cache.drainEvents();
    expect(ev).toHaveLength(2);
    expect(ev[0]).toMatchObject({ type: "BlockStored", parent_block_hash: null, block_hashes: a.hashes, token_ids: tokens(2, 0, 0), block_size: BS, medium: "GPU" });
    expect(ev[1]).toMatchObject({ type: "BlockStored", parent_block_hash: a.hashes[1], block_hashes: b.hashes.slice(2), token_ids: tokens(2, 2, 7).slice(8) });
    expect(cache.drainEvents()).toEqual([]);
  });

  it("should collapse a block filled with content already cached onto the cached block, without a second BlockStored", () => {
    const cache = new KvCache(8, BS);
    const toks = tokens(2, 0, 0);
    const h = hasher.hashBlocks(toks);
    // Two sequences computing the same prompt at once: neither hit the cache when admitted.
    const [a0, a1, b0, b1] = cache.allocate(4);
    const aIds = cache.commit(null, [{ id: a0!, hashes: h[0]!, tokens: toks.slice(0, 4) }, { id: a1!, hashes: h[1]!, tokens: toks.slice(4, 8) }]);
    const bIds = cache.commit(null, [{ id: b0!, hashes: h[0]!, tokens: toks.slice(0, 4) }, { id: b1!, hashes: h[1]!, tokens: toks.slice(4, 8) }]);
    expect(bIds).toEqual(aIds);
    expect(cache.stats.collapsed).toBe(2);
    expect(cache.usedBlocks).toBe(2);
    expect(cache.drainEvents().filter((e) => e.type === "BlockStored")).toHaveLength(1);
    expect(cache.audit()).toEqual([]);
  });
});

describe("KvCache eviction", () => {
  it("should evict a finished request's blocks tail-first (deepest first)", () => {
    const cache = new KvCache(4, BS);
    const a = fill(cache, tokens(0, 4, 1));
    cache.release(a.ids);
    cache.drainEvents();
    expect(cache.evictionOrder()).toEqual([...a.hashes].reverse());
    cache.allocate(1);
    expect(cache.drainEvents()).toEqual([{ type: "BlockRemoved", block_hashes: [a.hashes[3]], medium: "GPU" }]);
    cache.allocate(2);
    expect(cache.drainEvents()).toEqual([{ type: "BlockRemoved", block_hashes: [a.hashes[2], a.hashes[1]], medium: "GPU" }]);
    expect(cache.cachedHashes()).toEqual(new Set([a.hashes[0]]));
  });

  it("should keep a shared prefix until every suffix that hangs off it is gone", () => {
    const cache = new KvCache(6, BS);
    const a = fill(cache, tokens(2, 2, 1));
    const b = fill(cache, tokens(2, 2, 2));
    cache.release(a.ids);
    cache.release(b.ids);
    const order = cache.evictionOrder();
    expect(order).toEqual([a.hashes[3], a.hashes[2], b.hashes[3], b.hashes[2], a.hashes[1], a.hashes[0]]);
  });

  it("should use never-hashed free blocks before evicting cached ones", () => {
    const cache = new KvCache(6, BS);
    const a = fill(cache, tokens(0, 2, 1));
    const partial = cache.allocate(1); // e.g. the unfinished last block of a request
    cache.release([...a.ids, ...partial]);
    cache.drainEvents();
    cache.allocate(4); // 3 never used + the partial block: nothing evicted yet
    expect(cache.drainEvents()).toEqual([]);
    expect(cache.cachedBlocks).toBe(2);
    cache.allocate(1);
    expect(cache.drainEvents()).toEqual([{ type: "BlockRemoved", block_hashes: [a.hashes[1]], medium: "GPU" }]);
  });

  it("should take a prefix hit out of the eviction order", () => {
    const cache = new KvCache(4, BS);
    const a = fill(cache, tokens(2, 0, 0));
    cache.release(a.ids);
    fill(cache, tokens(2, 1, 3)); // reuses both, adds one
    cache.allocate(1);
    expect(cache.drainEvents().filter((e) => e.type === "BlockRemoved")).toEqual([]);
    expect(() => cache.allocate(1)).toThrow(expect.objectContaining({ code: "KVGATE_ERR_CAPACITY" }));
  });
});

describe("KvCache capacity", () => {
  it("should refuse an allocation that needs more blocks than are free or evictable", () => {
    const cache = new KvCache(5, BS);
    const a = fill(cache, tokens(0, 3, 1));
    expect(cache.canAllocate(2)).toBe(true);
    expect(cache.canAllocate(3)).toBe(false);
    cache.release(a.ids);
    expect(cache.canAllocate(5)).toBe(true);
    // Re-using A's blocks pins them: only the 2 never-used blocks remain for fresh ones.
    expect(cache.canAllocate(2, a.ids)).toBe(true);
    expect(cache.canAllocate(3, a.ids)).toBe(false);
  });

  it("should report usage as referenced blocks over all blocks", () => {
    const cache = new KvCache(8, BS);
    const a = fill(cache, tokens(0, 2, 1));
    expect(cache.usage()).toBe(2 / 8);
    cache.release(a.ids);
    expect(cache.usage()).toBe(0);
    expect(() => cache.release(a.ids)).toThrow(expect.objectContaining({ code: "KVGATE_ERR_STATE" }));
  });

  it("should reset only when idle, forgetting every block and emitting AllBlocksCleared", () => {
    const cache = new KvCache(8, BS);
    const a = fill(cache, tokens(0, 2, 1));
    expect(cache.reset()).toBe(false);
    cache.release(a.ids);
    cache.drainEvents();
    expect(cache.reset()).toBe(true);
    expect(cache.drainEvents()).toEqual([{ type: "AllBlocksCleared" }]);
    expect(cache.cachedBlocks).toBe(0);
    expect(cache.matchPrefix(hasher.hashBlocks(tokens(0, 2, 1)), 2)).toEqual([]);
    expect(cache.audit()).toEqual([]);
  });

  it("should neither match nor register blocks with prefix caching off", () => {
    const cache = new KvCache(8, BS, false);
    const a = fill(cache, tokens(0, 2, 1));
    cache.release(a.ids);
    expect(fill(cache, tokens(0, 2, 1)).hits).toBe(0);
    expect(cache.drainEvents()).toEqual([]);
  });
});
