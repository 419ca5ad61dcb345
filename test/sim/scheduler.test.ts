import { describe, it, expect } from "vitest";
import { KvCache } from "../../src/sim/kv-cache.ts";
import { referenceBlockHasher, wasmBlockHasher } from "../../src/sim/block-hasher.ts";
import { Scheduler } from "../../src/sim/scheduler.ts";
import { SimSequence } from "../../src/sim/sim-sequence.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";
import { hashIndex, range } from "./helpers.ts";

const BS = 16;
const hasher = referenceBlockHasher(BS);

function setup(blocks: number, o: { maxNumSeqs?: number; maxNumBatchedTokens?: number; enableChunkedPrefill?: boolean } = {}) {
  const cache = new KvCache(blocks, BS);
  const s = new Scheduler({ blockSize: BS, maxNumSeqs: 8, maxNumBatchedTokens: 1024, enableChunkedPrefill: true, ...o }, cache, hasher);
  let n = 0;
  const seq = (prompt: number[], maxTokens = 4): SimSequence => {
    const q = new SimSequence(`r${n++}`, prompt, maxTokens, 0, hasher.hashBlocks(prompt));
    s.add(q);
    return q;
  };
  return { cache, s, seq };
}

/** What the engine does at the end of a step for sequences that completed their pending tokens. */
function sample(s: Scheduler): void {
  for (const q of [...s.running]) if (q.pending === 0) q.tokens.push(7);
}

describe("Scheduler token budget", () => {
  it("should serve running decodes first and give the rest of the budget to a prefill chunk", () => {
    const { s, seq } = setup(64, { maxNumBatchedTokens: 32 });
    const a = seq(range(0, 16));
    s.schedule();
    sample(s);
    const b = seq(range(100, 100));
    const plan = s.schedule();
    expect(plan.items.map((i) => [i.seq.id, i.tokens, i.decode])).toEqual([[a.id, 1, true], [b.id, 31, false]]);
    expect(plan.decodes).toBe(1);
    expect(plan.prefillTokens).toBe(31);
    const next = s.schedule();
    expect(next.items.map((i) => [i.seq.id, i.tokens])).toEqual([[b.id, 32]]); // a has nothing to compute until sampled
  });

  it("should admit no more than maxNumSeqs sequences", () => {
    const { s, seq } = setup(64, { maxNumSeqs: 2 });
    seq(range(0, 20));
    seq(range(100, 20));
    seq(range(200, 20));
    const plan = s.schedule();
    expect(plan.admissions).toHaveLength(2);
    expect(s.running).toHaveLength(2);
    expect(s.waiting).toHaveLength(1);
  });

  it("should not split a prompt when chunked prefill is off", () => {
    const { s, seq } = setup(64, { maxNumBatchedTokens: 64, enableChunkedPrefill: false });
    seq(range(0, 40));
    seq(range(100, 40));
    const plan = s.schedule();
    expect(plan.items.map((i) => i.tokens)).toEqual([40]);
    expect(s.waiting).toHaveLength(1);
  });
});

describe("Scheduler prefix hits and KV limits", () => {
  it("should recompute the last block of a fully cached prompt (at least one token is computed)", () => {
    const { s, seq } = setup(64);
    const a = seq(range(0, 32), 1);
    s.schedule();
    s.remove(a);
    const b = seq(range(0, 32), 1);
    const plan = s.schedule();
    expect(plan.admissions[0]).toMatchObject({ queried: 32, hit: 16 });
    expect(b.cachedTokens).toBe(16);
    expect(plan.items[0]!.tokens).toBe(16);
  });

  it("should leave a request waiting while its blocks cannot be had", () => {
    const { s, seq, cache } = setup(6);
    seq(range(0, 64));
    const b = seq(range(100, 64));
    s.schedule();
    expect(b.status).toBe("waiting");
    expect(cache.usedBlocks).toBe(4);
  });

  it("should preempt the most recently admitted sequence (LIFO) when a running one needs a block", () => {
    const { s, seq, cache } = setup(8);
    const a = seq(range(0, 64), 40);
    const b = seq(range(100, 40), 40);
    const c = seq(range(200, 16), 40);
    s.schedule(); // a: 4 blocks, b: 3 (40 tokens), c: 1 → full
    expect(cache.freeBlocks).toBe(0);
    sample(s);
    const plan = s.schedule(); // a decodes its 65th token → needs a 5th block
    expect(plan.preempted.map((q) => q.id)).toEqual([c.id]);
    expect(s.waiting[0]).toBe(c);
    expect(c.preemptions).toBe(1);
    expect(c.numComputed).toBe(0);
    expect(plan.admissions).toEqual([]);
    expect(plan.items.map((i) => i.seq.id)).toEqual([a.id, b.id]);
    expect(cache.audit()).toEqual([]);
  });
});

describe("Block hashing", () => {
  it("should agree between the WASM hasher and the BigInt reference, in bulk and block by block", async () => {
    const wasm = wasmBlockHasher(await hashIndex(), BS);
    const rnd = seededRandom(5);
    const toks = Array.from({ length: 16 * 9 + 5 }, () => rnd.u32());
    const bulk = wasm.hashBlocks(toks);
    expect(bulk).toEqual(hasher.hashBlocks(toks));
    expect(bulk).toHaveLength(9);
    let parent: bigint | null = null;
    for (let i = 0; i < 9; i++) {
      const one = wasm.nextBlock(parent, toks.slice(i * BS, (i + 1) * BS));
      expect(one).toEqual(bulk[i]);
      expect(hasher.nextBlock(parent, toks.slice(i * BS, (i + 1) * BS))).toEqual(bulk[i]);
      parent = one.seq;
    }
  });
});
