import { describe, expect, it } from "vitest";
import { InflightPrefixes } from "../../src/routing/inflight-prefixes.ts";
import { KeyPool } from "../../src/routing/key-pool.ts";
import { createPrng, randomInt } from "../../src/routing/prng.ts";
import { chainKeys as chain } from "./helpers.ts";

interface Live {
  keys: Uint32Array;
  n: number;
  slot: number;
}

/** The model: per slot, the deepest block of the query found among that slot's prompts, compared word by word. */
function expected(live: readonly Live[], q: Uint32Array, n: number, slot: number): number {
  let best = 0;
  for (const p of live) {
    if (p.slot !== slot) continue;
    let d = 0;
    while (d < n && d < p.n && p.keys[2 * d] === q[2 * d] && p.keys[2 * d + 1] === q[2 * d + 1]) d++;
    best = Math.max(best, d);
  }
  return best;
}

describe("in-flight prefixes across ranks", () => {
  it("gives every slot its overlap in one query, under random adds, removes and duplicates", () => {
    for (const seed of [1, 2, 3]) {
      const rand = createPrng(seed);
      const slots = 8;
      const inflight = new InflightPrefixes(slots);
      const live: Live[] = [];
      for (let step = 0; step < 2500; step++) {
        if (live.length === 0 || rand() < 0.55) {
          const n = randomInt(rand, 40);
          // Bookings own their copies, so an identical prompt booked again (maybe elsewhere) is a new array.
          const src = rand() < 0.15 && live.length > 0 ? live[randomInt(rand, live.length)]!
            : { keys: chain(randomInt(rand, 3), step, n, randomInt(rand, n + 1)), n };
          const p = { keys: src.keys.slice(), n: src.n, slot: randomInt(rand, slots) };
          inflight.query(p.keys, p.n);
          for (let s = 0; s < slots; s++) expect(inflight.sharedOf(s)).toBe(expected(live, p.keys, p.n, s));
          inflight.add(p.keys, p.n, p.slot);
          live.push(p);
        } else {
          const p = live.splice(randomInt(rand, live.length), 1)[0]!;
          expect(inflight.remove(p.keys, p.n)).toBe(true);
        }
        expect(inflight.size).toBe(live.filter((q) => q.n > 0).length);
      }
      // A removed prompt's buffer is gone even while an equal one stays live.
      const a = chain(9, 1, 12, 12), b = a.slice();
      inflight.add(a, 12, 0);
      inflight.add(b, 12, 1);
      expect(inflight.remove(a, 12)).toBe(true);
      expect(inflight.remove(a, 12)).toBe(false);
      inflight.query(chain(9, 2, 12, 12), 12);
      expect([inflight.sharedOf(0), inflight.sharedOf(1)]).toEqual([expected(live, b, 12, 0), 12]);
      expect(inflight.remove(b, 12)).toBe(true);
    }
  });
});

describe("key pool", () => {
  it("copies into reused power-of-two buffers and keeps at most maxIdle idle", () => {
    const pool = new KeyPool(2);
    const src = new Uint32Array(300).map((_, i) => i * 7);
    const a = pool.copy(src, 200);
    expect(Array.from(a)).toEqual(Array.from(src.subarray(0, 200)));
    expect(a.buffer.byteLength).toBe(256 * 4);
    pool.release(a);
    expect(pool.idle).toBe(1);
    const b = pool.copy(src, 130);
    expect(b.buffer).toBe(a.buffer);
    expect(Array.from(b)).toEqual(Array.from(src.subarray(0, 130)));
    expect(pool.idle).toBe(0);
    const c = pool.copy(src, 10), d = pool.copy(src, 10), e = pool.copy(src, 10);
    for (const x of [b, c, d, e]) pool.release(x);
    expect(pool.idle).toBe(2);
    // Arrays of no size class (not made by a pool) are not adopted.
    const roomy = new KeyPool(8);
    roomy.release(new Uint32Array(100));
    roomy.release(new Uint32Array(new ArrayBuffer(1024), 4, 10));
    expect(roomy.idle).toBe(0);
  });
});
