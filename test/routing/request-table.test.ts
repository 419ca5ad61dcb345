import { describe, expect, it } from "vitest";
import { RequestTable } from "../../src/routing/request-table.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";

describe("RequestTable", () => {
  it("matches a Map on random inserts, replacements, lookups and deletes across growth and wraparound", () => {
    for (const seed of [1, 2, 3, 4]) {
      const rng = seededRandom(seed);
      const t = new RequestTable<number>(() => rng.next());
      const m = new Map<string, number>();
      // A small id space forces long probe runs, deletions inside them and replacements; a live peak of ~300 forces growth.
      const space = seed % 2 === 0 ? 40 : 600;
      for (let op = 0; op < 20_000; op++) {
        const id = `req-${rng.int(space)}`;
        const r = rng.next();
        if (r < 0.45) {
          t.set(id, op);
          m.set(id, op);
        } else if (r < 0.85) {
          expect(t.delete(id)).toBe(m.delete(id));
        } else {
          expect(t.get(id)).toBe(m.get(id));
          expect(t.has(id)).toBe(m.has(id));
        }
        expect(t.size).toBe(m.size);
      }
      for (let i = 0; i < space; i++) expect(t.get(`req-${i}`)).toBe(m.get(`req-${i}`));
    }
  });

  it("keeps every id of a burst reachable and empties fully", () => {
    const rng = seededRandom(9);
    const t = new RequestTable<string>(() => rng.next());
    const ids = Array.from({ length: 5000 }, (_, i) => `chatcmpl-${i.toString(36)}-${rng.u32()}`);
    for (const id of ids) t.set(id, id.toUpperCase());
    expect(t.size).toBe(5000);
    for (const id of ids) expect(t.get(id)).toBe(id.toUpperCase());
    expect(t.get("chatcmpl-absent")).toBeUndefined();
    for (const id of ids.slice().reverse()) expect(t.delete(id)).toBe(true);
    expect(t.size).toBe(0);
    for (const id of ids) expect(t.has(id)).toBe(false);
    expect(t.delete(ids[0]!)).toBe(false);
  });
});
