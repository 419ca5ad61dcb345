import { describe, expect, it } from "vitest";
import { withoutBusy } from "../../src/routing/busy-policy.ts";
import { createPrng, randomInt } from "../../src/routing/prng.ts";
import type { RankState } from "../../src/routing/index.ts";

/** Just what the busy check reads of a rank: its prefill in flight, here and at peers. */
function rank(worker: object, prefill: number): RankState {
  return { worker, load: { activePrefillTokens: prefill, activeBlocks: 0, remote: { prefillTokens: 0, blocks: 0 } } } as unknown as RankState;
}

describe("withoutBusy", () => {
  it("keeps a worker while any of its ranks is idle, in order, and returns the input itself when nothing is busy", () => {
    const rand = createPrng(19);
    const t = { activePrefillTokens: 100 };
    for (let trial = 0; trial < 500; trial++) {
      const workers = Array.from({ length: 1 + randomInt(rand, 6) }, (_, i) => ({ id: `w${i}` }));
      const busyShare = [0, 0.3, 0.9, 1][trial % 4]!;
      const ranks = Array.from({ length: 1 + randomInt(rand, 12) }, () => rank(workers[randomInt(rand, workers.length)]!, rand() < busyShare ? 150 : 50));
      const idleWorkers = new Set(ranks.filter((r) => r.load.activePrefillTokens <= 100).map((r) => r.worker));
      const expected = ranks.filter((r) => idleWorkers.has(r.worker));
      const got = withoutBusy(ranks, t);
      expect(got).toEqual(expected);
      if (ranks.every((r) => r.load.activePrefillTokens <= 100)) expect(got).toBe(ranks);
    }
  });

  it("returns the ranks untouched without thresholds", () => {
    const ranks = [rank({}, 1e9)];
    expect(withoutBusy(ranks, {})).toBe(ranks);
  });
});
