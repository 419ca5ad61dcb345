import { describe, expect, it } from "vitest";
import { seededRandom } from "../../src/core/seeded-random.ts";
import { BlockLru } from "../../src/sim/block-lru.ts";

describe("BlockLru", () => {
  it("should keep the order an array model keeps under random appends, deletes, shifts and clears", () => {
    const rnd = seededRandom(5);
    const cap = 64;
    const lru = new BlockLru(cap);
    let model: number[] = [];
    for (let op = 0; op < 20_000; op++) {
      const r = rnd.int(100);
      const id = rnd.int(cap);
      if (r < 45) {
        lru.append(id);
        model = model.filter((x) => x !== id);
        model.push(id);
      } else if (r < 75) {
        expect(lru.delete(id)).toBe(model.includes(id));
        model = model.filter((x) => x !== id);
      } else if (r < 99) {
        expect(lru.shift()).toBe(model.shift());
      } else {
        lru.clear();
        model = [];
      }
      expect(lru.size).toBe(model.length);
      expect(lru.has(id)).toBe(model.includes(id));
      if (op % 97 === 0) expect([...lru.keys()]).toEqual(model);
    }
  });

  it("should cycle a large list front to back, twice, and keep its order", () => {
    const n = 200_000;
    const lru = new BlockLru(n);
    for (let i = 0; i < n; i++) lru.append(i);
    // Evict from the front and re-append, twice around: every id comes back in the same order.
    for (let i = 0; i < 2 * n; i++) lru.append(lru.shift()!);
    expect(lru.shift()).toBe(0);
    expect(lru.size).toBe(n - 1);
  });
});
