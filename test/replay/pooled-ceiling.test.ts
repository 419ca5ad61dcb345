/** @module The replay's ceiling: one pooled LRU prefix cache of the fleet's blocks, and its column in the report. */
import { describe, expect, it } from "vitest";
import { blockKeys, pooledLruCeiling } from "../../src/replay/pooled-ceiling.ts";
import type { ReplayRequest } from "../../src/replay/replay-request.ts";
import { TABLE_HEADER, tableRows } from "../../src/replay/summary-table.ts";
import { syntheticResults } from "./helpers.ts";

const req = (index: number, ...segments: [number, number][]): ReplayRequest => ({
  index, at: index, outputLength: 1, segments: segments.map(([id, length]) => ({ id, length })),
  inputLength: segments.reduce((n, [, l]) => n + l, 0),
});

describe("pooled LRU ceiling", () => {
  it("keys a block by its whole prefix: equal prefixes share keys, a different earlier token changes every later one", () => {
    const a = blockKeys(req(0, [1, 64], [2, 64]), 32), b = blockKeys(req(1, [1, 64], [3, 64]), 32), c = blockKeys(req(2, [9, 64], [2, 64]), 32);
    expect(a).toHaveLength(4);
    expect(b.slice(0, 2)).toEqual(a.slice(0, 2));
    expect(b.slice(2).some((k) => a.includes(k))).toBe(false);
    expect(c.some((k) => a.includes(k))).toBe(false);
    // Complete blocks only.
    expect(blockKeys(req(3, [1, 95]), 32)).toEqual(a.slice(0, 2));
  });

  it("hits the cached leading blocks of each request, in arrival order", () => {
    const rs = [req(0, [1, 64], [2, 64]), req(1, [1, 64], [3, 64]), req(2, [1, 64], [2, 64])];
    // Second: 2 of its 4 blocks; third: all 4 (both of its suffix blocks are still held).
    expect(pooledLruCeiling(rs, 32, 1_000).hitRate).toBeCloseTo((2 * 32 + 4 * 32) / (3 * 128), 12);
  });

  it("evicts the least recently used block, and a lost first block ends the prefix", () => {
    const rs = [req(0, [1, 128]), req(1, [1, 128])];
    expect(pooledLruCeiling(rs, 32, 4).hitRate).toBeCloseTo(0.5, 12);
    // Three blocks held: the first was evicted, so nothing after it counts either.
    expect(pooledLruCeiling(rs, 32, 3).hitRate).toBe(0);
    // A request that touches the shared prefix keeps it over an older one.
    const touched = [req(0, [1, 64]), req(1, [2, 64]), req(2, [1, 64]), req(3, [3, 64]), req(4, [1, 64])];
    expect(pooledLruCeiling(touched, 32, 4).hitRate).toBeCloseTo((64 + 64) / (5 * 64), 12);
  });

  it("shows each policy's hit rate as a share of the ceiling in the comparison table", () => {
    const doc = syntheticResults();
    const rows = tableRows(doc.policies, 0.5);
    const col = ["hit rate", "of ceiling"].map((h) => rows.map((r) => r[TABLE_HEADER.indexOf(h)]));
    for (let i = 0; i < rows.length; i++) expect(Number.parseFloat(col[1]![i]!)).toBeCloseTo(Number.parseFloat(col[0]![i]!) * 2, 0);
    expect(tableRows(doc.policies, 0).every((r) => r[TABLE_HEADER.indexOf("of ceiling")] === "-")).toBe(true);
  });
});

