/** The divergence figure between replicas' index digests: 0 only when every (worker, rank) agrees. */
import { describe, expect, it } from "vitest";
import { indexDivergence, parseIndexDigest, type RankDigest } from "../../src/replicas/index-divergence.ts";

const doc = (ranks: RankDigest[]) => parseIndexDigest({ object: "index_digest", ranks, total_blocks: 0 });
const r = (worker: string, blocks: number, digest: string, dp_rank = 0): RankDigest => ({ worker, dp_rank, blocks, digest: digest.padStart(16, "0") });

describe("index divergence", () => {
  it("is 0 for identical digests, whatever the order of the ranks", () => {
    const a = doc([r("w1", 3, "a1"), r("w2", 5, "b2")]);
    const b = doc([r("w2", 5, "b2"), r("w1", 3, "a1")]);
    expect(indexDivergence([a, b])).toEqual({ divergence: 0, ranks: 2, differing: 0, blocksApart: 0 });
  });

  it("counts ranks that differ in digest or are missing on one replica", () => {
    const a = doc([r("w1", 3, "a1"), r("w2", 5, "b2"), r("w3", 2, "c3")]);
    const b = doc([r("w1", 3, "a1"), r("w2", 5, "ff")]);
    expect(indexDivergence([a, b])).toEqual({ divergence: 2 / 3, ranks: 3, differing: 2, blocksApart: 2 });
  });

  it("treats an empty rank and an unlisted one alike, and tells ranks of one worker apart", () => {
    const a = doc([r("w1", 0, "0"), r("w1", 4, "d4", 1)]);
    const b = doc([r("w1", 4, "d4", 1)]);
    expect(indexDivergence([a, b]).divergence).toBe(0);
    expect(indexDivergence([a, doc([r("w1", 4, "d4", 0)])]).divergence).toBe(1);
  });

  it("compares more than two replicas", () => {
    const same = doc([r("w1", 1, "1")]);
    expect(indexDivergence([same, same, doc([r("w1", 2, "2")])])).toMatchObject({ divergence: 1, blocksApart: 1 });
    expect(indexDivergence([same]).divergence).toBe(0);
  });

  it("refuses what is not a digest answer", () => {
    expect(() => parseIndexDigest({ error: { message: "nope" } })).toThrow(/not an index digest/);
    expect(() => parseIndexDigest({ object: "index_digest", ranks: [{ worker: "w", dp_rank: 0, blocks: 1, digest: "xyz" }] })).toThrow();
  });
});
