import { describe, it, expect } from "vitest";
import { seededRandom, type Random } from "../../src/core/seeded-random.ts";
import { ReferenceIndex } from "../../src/reference/index-reference.ts";
import { decodeKvEventBatch } from "../../src/events/kv-event-decode.ts";
import type { KvCacheEvent } from "../../src/sim/kv-events.ts";
import type { SimHandle } from "../../src/sim/sim-engine.ts";
import { hashIndex, range, simFixture, type SimFixture } from "./helpers.ts";

const BS = 16;

/** Mirrors a sim from its published events: a plain hash set and the router's reference index (slot 0). */
class Mirror {
  readonly hashes = new Set<bigint>();
  readonly index = new ReferenceIndex(1 << 16);
  nextSeq = 0;

  constructor(private readonly local: (tokens: number[]) => bigint[]) {
    this.index.openSlot(0);
  }

  apply(e: KvCacheEvent, set = this.hashes, checkIndex = true): void {
    switch (e.type) {
      case "BlockStored": {
        expect(e.token_ids).toHaveLength(e.block_hashes.length * BS);
        expect(e.block_size).toBe(BS);
        if (e.parent_block_hash !== null) expect(set.has(e.parent_block_hash)).toBe(true);
        for (const h of e.block_hashes) {
          expect(set.has(h)).toBe(false);
          set.add(h);
        }
        if (!checkIndex) return;
        const locals = this.local(e.token_ids);
        expect(this.index.store(0, e.parent_block_hash, e.block_hashes.map((hash, i) => ({ hash, local: locals[i]! })))).toBe("applied");
        // The router's own chain over the event's tokens equals the hash the sim published.
        for (const h of e.block_hashes) expect(this.index.entries.get(0)!.get(h)!.seq).toBe(h);
        return;
      }
      case "BlockRemoved":
        for (const h of e.block_hashes) expect(set.delete(h)).toBe(true);
        if (checkIndex) expect(this.index.remove(0, e.block_hashes)).toBe(0);
        return;
      case "AllBlocksCleared":
        set.clear();
        if (checkIndex) this.index.clear(0);
    }
  }

  /** Applies every batch not applied yet, checking the sequence numbers run 0, 1, 2, … without gaps. */
  catchUp(f: SimFixture): void {
    for (const b of f.batches.slice(this.nextSeq)) {
      expect(b.seq).toBe(this.nextSeq++);
      const d = decodeKvEventBatch(b.bytes);
      expect(d.skipped).toBe(0);
      expect(d.data_parallel_rank).toBe(0);
      for (const e of d.events) this.apply(e);
    }
  }

  /** The mirror plus the events the running step has produced but not yet published must equal the cache. */
  check(f: SimFixture): void {
    this.catchUp(f);
    const expected = new Set(this.hashes);
    for (const e of f.engine.cache.peekEvents()) this.apply(e, expected, false);
    expect(expected).toEqual(f.engine.cache.cachedHashes());
    expect(new Set(this.index.entries.get(0)!.keys())).toEqual(this.hashes);
  }
}

/** Prompts sharing system prompts and second segments, with unique tails; random lengths, arrivals and aborts. */
function workload(f: SimFixture, rnd: Random, n: number): SimHandle[] {
  const systems = [0, 1, 2, 3].map((k) => range(10_000 * (k + 1), 24 + rnd.int(64)));
  const seconds = [0, 1, 2, 3, 4, 5].map((k) => range(100_000 * (k + 1), 8 + rnd.int(40)));
  const handles: SimHandle[] = [];
  let at = 0;
  for (let i = 0; i < n; i++) {
    at += rnd.int(25);
    const prompt = [...systems[rnd.int(systems.length)]!];
    if (rnd.next() < 0.6) prompt.push(...seconds[rnd.int(seconds.length)]!);
    prompt.push(...range(1_000_000 + i * 1000, rnd.int(60)));
    const maxTokens = 1 + rnd.int(40);
    const abortAfter = rnd.next() < 0.15 ? rnd.int(200) : -1;
    f.clock.setTimer(at, () => {
      const h = f.engine.submit({ prompt, maxTokens });
      handles.push(h);
      if (abortAfter >= 0) f.clock.setTimer(abortAfter, () => h.abort());
    });
  }
  return handles;
}

async function run(seed: number, encoding: "array" | "map"): Promise<void> {
  const index = await hashIndex();
  const f = await simFixture({ numGpuBlocks: 40, maxNumSeqs: 6, maxNumBatchedTokens: 160 }, encoding);
  const mirror = new Mirror((tokens) => index.hash(tokens, { blockSize: BS }).local);
  const rnd = seededRandom(seed);
  const handles = workload(f, rnd, 80);
  for (let i = 0; i < 2000 && (f.clock.pending > 0 || !f.engine.idle); i++) {
    f.clock.advance(1 + rnd.int(20));
    mirror.check(f);
  }
  const results = await Promise.all(handles.map((h) => h.result));
  expect(results).toHaveLength(80);
  expect(f.engine.cache.stats.evicted).toBeGreaterThan(0);
  expect(f.engine.metrics.counts().preemptions + results.filter((r) => r.reason === "abort").length).toBeGreaterThan(0);
  expect(f.engine.cache.usedBlocks).toBe(0);
  expect(f.engine.cache.audit()).toEqual([]);
  expect(f.engine.resetPrefixCache()).toBe(true);
  mirror.check(f);
  expect(mirror.hashes.size).toBe(0);
}

describe("KV events replay to exactly the cache's block set", () => {
  for (const seed of [1, 2, 3]) {
    it(`should mirror the cache after every step of a random workload (seed ${seed}, array form)`, async () => {
      await run(seed, "array");
    });
  }

  it("should mirror the cache the same way from map-form events", async () => {
    await run(7, "map");
  });

  it("should produce identical results and event bytes for the same seed", async () => {
    const once = async () => {
      const f = await simFixture({ numGpuBlocks: 40, maxNumSeqs: 6, maxNumBatchedTokens: 160 });
      const handles = workload(f, seededRandom(11), 40);
      f.clock.runUntilIdle();
      const results = await Promise.all(handles.map((h) => h.result));
      return { results, bytes: f.batches.map((b) => Buffer.from(b.bytes).toString("hex")).join("|") };
    };
    const [a, b] = [await once(), await once()];
    expect(a.results).toEqual(b.results);
    expect(a.bytes).toBe(b.bytes);
    expect(a.bytes.length).toBeGreaterThan(0);
  });
});
