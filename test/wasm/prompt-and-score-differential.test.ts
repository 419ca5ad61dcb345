import { describe, it, expect, beforeAll } from "vitest";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import { KvIndex } from "../../src/core/kv-index.ts";
import { loadCoreModule } from "../../src/wasm/module-fs.ts";
import { scoreCandidates, type ScoreCandidate } from "../../src/core/score-kernel.ts";
import { hashPromptReference } from "../../src/reference/block-hash-reference.ts";
import { chooseReference, costReference } from "../../src/reference/score-reference.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";

let idx: KvIndex;
beforeAll(async () => {
  idx = await createKvIndex({ capacity: 1024, maxSlots: 64 });
});

describe("prompt hashing vs reference", () => {
  it.each(["release", "release-simd"] as const)("should agree on random prompts, block sizes, salts, Eagle windows and multimodal hashes (%s build)", async (variant) => {
    const idx = new KvIndex(await loadCoreModule(variant), { capacity: 1024, maxSlots: 4 });
    const rnd = seededRandom(21);
    for (let k = 0; k < 400; k++) {
      const bs = [1, 2, 3, 4, 15, 16, 32, 60, 64, 128, 300][rnd.int(11)]!;
      const tokens = Array.from({ length: rnd.int(bs * 6 + 2) }, () => rnd.u32());
      const blocks = Math.floor(tokens.length / bs);
      const opts = {
        blockSize: bs,
        lora: rnd.next() < 0.3 ? `lora-${rnd.int(5)}` : undefined,
        namespace: rnd.next() < 0.3 ? `ns-${rnd.int(5)}` : undefined,
        eagle: rnd.next() < 0.2,
        multimodal: blocks > 1 && rnd.next() < 0.3
          ? Array.from({ length: 1 + rnd.int(4) }, () => ({ block: rnd.int(blocks - 1), hash: rnd.u64() }))
          : undefined,
      };
      expect(idx.hash(tokens, opts), JSON.stringify({ k, bs, n: tokens.length })).toEqual(hashPromptReference(tokens, opts));
    }
  });
});

describe("scoring kernel", () => {
  it("should reproduce the reference worked example: costs 18 / 10 / 11, the second worker chosen", () => {
    const base = { activePrefillTokens: 0, activeDecodeBlocks: 0, blockSize: 16, treeSize: 100 };
    const r = scoreCandidates(idx, [
      { ...base, overlapBlocks: 2, activeOverlapBlocks: 0 },
      { ...base, overlapBlocks: 5, activeOverlapBlocks: 5 },
      { ...base, overlapBlocks: 8, activeOverlapBlocks: 1 },
    ], { isl: 160, rand: 0.5 });
    expect(r.costs).toEqual([18, 10, 11]);
    expect(r.chosen).toBe(1);
    expect(r.potentialPrefillTokens).toEqual([128, 80, 32]);
    expect(r.potentialDecodeBlocks).toEqual([10, 5, 9]);
  });

  it("should break cost ties by the smallest tree, then by the random draw", () => {
    const c = (treeSize: number): ScoreCandidate => ({ overlapBlocks: 0, activePrefillTokens: 0, activeDecodeBlocks: 0, blockSize: 16, treeSize });
    expect(scoreCandidates(idx, [c(5), c(3), c(9)], { isl: 64, rand: 0.99 }).chosen).toBe(1);
    expect(scoreCandidates(idx, [c(3), c(5), c(3)], { isl: 64, rand: 0.1 }).chosen).toBe(0);
    expect(scoreCandidates(idx, [c(3), c(5), c(3)], { isl: 64, rand: 0.9 }).chosen).toBe(2);
  });

  it("should agree with the reference on random candidates, weights and temperatures", () => {
    const rnd = seededRandom(5);
    let sampled = 0;
    for (let k = 0; k < 3000; k++) {
      const n = 1 + rnd.int(64);
      const cands: ScoreCandidate[] = Array.from({ length: n }, () => ({
        overlapBlocks: rnd.int(40), activePrefillTokens: rnd.int(5) * 1000, activeDecodeBlocks: rnd.int(300),
        activeOverlapBlocks: rnd.int(10), blockSize: [16, 64][rnd.int(2)]!, treeSize: rnd.int(4),
      }));
      const req = { isl: rnd.int(4000), overlapWeight: rnd.next() < 0.5 ? 1 : rnd.next() * 3, temperature: rnd.next() < 0.5 ? 0 : rnd.next() * 2, rand: rnd.next() };
      const r = scoreCandidates(idx, cands, req);
      cands.forEach((c, i) => expect(r.costs[i]).toBeCloseTo(costReference(c, req.isl, req.overlapWeight), 9));
      if (req.temperature > 0) sampled++;
      expect(r.chosen).toBe(chooseReference(cands, req));
    }
    expect(sampled).toBeGreaterThan(1000);
  });

  it("should sample cheap workers more often than expensive ones at temperature > 0", () => {
    const rnd = seededRandom(8);
    const cands: ScoreCandidate[] = [0, 10, 20].map((o) => ({ overlapBlocks: o, activePrefillTokens: 0, activeDecodeBlocks: 0, blockSize: 16, treeSize: 0 }));
    const hits = [0, 0, 0];
    for (let i = 0; i < 3000; i++) hits[scoreCandidates(idx, cands, { isl: 320, temperature: 0.5, rand: rnd.next() }).chosen]!++;
    expect(hits[2]!).toBeGreaterThan(hits[1]!);
    expect(hits[1]!).toBeGreaterThan(hits[0]!);
    expect(hits[0]!).toBeGreaterThan(0);
  });

  it("should reject a negative temperature and an empty candidate list", () => {
    expect(() => scoreCandidates(idx, [], { isl: 1, rand: 0 })).toThrow(expect.objectContaining({ code: "KVGATE_ERR_BAD_ARGUMENT" }));
    const c = { overlapBlocks: 0, activePrefillTokens: 0, activeDecodeBlocks: 0, blockSize: 16, treeSize: 0 };
    expect(() => scoreCandidates(idx, [c], { isl: 1, rand: 0, temperature: -1 })).toThrow(expect.objectContaining({ code: "KVGATE_ERR_BAD_ARGUMENT" }));
  });
});
