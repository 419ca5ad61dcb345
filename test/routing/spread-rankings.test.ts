import { describe, expect, it } from "vitest";
import { pickSpreadSet } from "../../src/routing/hot-prefixes.ts";
import { createPrng, randomInt } from "../../src/routing/prng.ts";
import { SpreadRankings } from "../../src/routing/spread-rankings.ts";

describe("SpreadRankings", () => {
  it("picks pickSpreadSet's set for random lists, holders and k, or declines", () => {
    const rand = createPrng(1905);
    const rankings = new SpreadRankings(512);
    let lists: number[][] = [];
    let fast = 0, declined = 0;
    for (let trial = 0; trial < 4000; trial++) {
      // A few lists reused across trials, as the kept list is, so cached rankings are hit and dropped.
      if (trial % 500 === 0) lists = Array.from({ length: 3 }, () => Array.from({ length: 3 + randomInt(rand, 300) }, () => randomInt(rand, 2 ** 32)));
      const list = lists[randomInt(rand, lists.length)]!;
      // Equal keys now and then: the tie rule (lower position first) must agree too.
      const keys = Float64Array.from(list, (v, i) => (i % 17 === 5 ? list[0]! : v));
      const n = keys.length, k = 1 + randomInt(rand, n - 1);
      const prefix = randomInt(rand, 6);
      const lo = prefix * 7919, hi = prefix * 104729;
      const overlap = new Float64Array(n);
      const heldList: number[] = [];
      const holders = rand() < 0.2 ? randomInt(rand, n) : randomInt(rand, 5);
      for (let h = 0; h < holders; h++) {
        const i = randomInt(rand, n);
        if (overlap[i] === 0) heldList.push(i);
        overlap[i] = 1 + randomInt(rand, 9);
      }
      const held = Int32Array.from(heldList);
      const ref = new Int32Array(n), got = new Int32Array(n);
      pickSpreadSet(n, k, lo, hi, overlap, 0, keys, ref, new Float64Array(n));
      if (rankings.pick(list, n, k, lo, hi, prefix, held, held.length, keys, got)) {
        fast++;
        expect([...got.subarray(0, k)], `trial ${trial}`).toEqual([...ref.subarray(0, k)]);
      } else declined++;
    }
    // Mostly answered from the cache; large k with few holders runs past the cached head and declines.
    expect(fast).toBeGreaterThan(1500);
    expect(declined).toBeGreaterThan(0);
  });
});
