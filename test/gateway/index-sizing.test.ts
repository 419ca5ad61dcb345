/** The index-sizing rules: fleet need, explicit value, default, bounds, and the later-addition check. */
import { describe, expect, it } from "vitest";
import {
  APPROX_FACTOR, chooseIndexSize, DEFAULT_INDEX_CAPACITY, describeIndexSize, EVENT_FACTOR, fleetEntries, IndexSizeWatch,
  MAX_INDEX_CAPACITY, MIN_INDEX_CAPACITY,
} from "../../src/gateway/index-sizing.ts";

describe("fleetEntries", () => {
  it("is undefined when no worker states its KV blocks", () => {
    expect(fleetEntries([])).toBeUndefined();
    expect(fleetEntries([{ kvEvents: true }, { dpSize: 4 }])).toBeUndefined();
  });

  it("sums blocks × ranks, × the event factor with KV events and × the approximate factor without", () => {
    expect(fleetEntries([{ totalKvBlocks: 1000, kvEvents: true }])).toEqual({ entries: 1250, blocks: 1000 });
    expect(fleetEntries([{ totalKvBlocks: 1000, kvEvents: false }])).toEqual({ entries: 2000, blocks: 1000 });
    // Unknown mode counts as approximate; dp ranks are separate engines.
    expect(fleetEntries([{ totalKvBlocks: 1000, dpSize: 4, kvEvents: true }, { totalKvBlocks: 10 }]))
      .toEqual({ entries: 4000 * EVENT_FACTOR + 10 * APPROX_FACTOR, blocks: 4010 });
  });

  it("counts a worker without a stated size as the largest stated one", () => {
    expect(fleetEntries([{ totalKvBlocks: 100, kvEvents: true }, { totalKvBlocks: 3000, kvEvents: true }, { kvEvents: true }]))
      .toEqual({ entries: Math.ceil(6100 * EVENT_FACTOR), blocks: 6100 });
  });

  it("rounds fractional entries up", () => {
    expect(fleetEntries([{ totalKvBlocks: 3, kvEvents: true }])!.entries).toBe(4);
  });
});

describe("chooseIndexSize", () => {
  const fleet = [{ totalKvBlocks: 40_000, kvEvents: true }, { totalKvBlocks: 40_000, kvEvents: true }];

  it("sizes from the fleet by default", () => {
    expect(chooseIndexSize(undefined, fleet)).toEqual({ capacity: 100_000, source: "fleet", fleetBlocks: 80_000 });
  });

  it("lets an explicit value win, even below the fleet's need", () => {
    expect(chooseIndexSize(4096, fleet)).toEqual({ capacity: 4096, source: "flag", fleetBlocks: 80_000 });
    expect(chooseIndexSize(1 << 20, [])).toEqual({ capacity: 1 << 20, source: "flag", fleetBlocks: 0 });
  });

  it("falls back to the default when nothing states a size", () => {
    expect(chooseIndexSize(undefined, [])).toEqual({ capacity: DEFAULT_INDEX_CAPACITY, source: "default", fleetBlocks: 0 });
    expect(chooseIndexSize(undefined, [{ kvEvents: true }]).source).toBe("default");
  });

  it("keeps within the core's bounds", () => {
    expect(chooseIndexSize(undefined, [{ totalKvBlocks: 16, kvEvents: true }]).capacity).toBe(MIN_INDEX_CAPACITY);
    expect(chooseIndexSize(undefined, [{ totalKvBlocks: 1 << 25, dpSize: 8, kvEvents: true }]).capacity).toBe(MAX_INDEX_CAPACITY);
  });

  it("describes the choice in one line", () => {
    expect(describeIndexSize(chooseIndexSize(undefined, fleet), 20 << 20)).toBe(
      "KV index: 100000 entries, sized from the fleet's 80000 KV blocks (×1.25 with KV events, ×2 approximate); ~20 MB reserved");
    expect(describeIndexSize(chooseIndexSize(2048, fleet), 1 << 20)).toContain("2048 entries, set by --index-capacity");
    expect(describeIndexSize(chooseIndexSize(undefined, []), 1 << 20)).toContain("default: no configured worker states total_kv_blocks");
  });
});

describe("IndexSizeWatch", () => {
  it("warns about and counts each addition that leaves the fleet larger than the index, and nothing else", () => {
    const warnings: string[] = [];
    let counted = 0;
    const watch = new IndexSizeWatch(chooseIndexSize(undefined, [{ totalKvBlocks: 1000, kvEvents: true }]), (m) => warnings.push(m), () => counted++);
    expect(watch.size.capacity).toBe(1250);
    watch.added("a", [{ totalKvBlocks: 1000, kvEvents: true }]);
    watch.added("b", [{ totalKvBlocks: 1000, kvEvents: true }, { kvEvents: true }]);
    expect([warnings.length, counted, watch.outgrown]).toEqual([1, 1, 1]);
    expect(warnings[0]).toBe("worker b: the fleet now calls for 2500 KV index entries (2000 KV blocks) but the index holds 1250, fixed at start; " +
      "restart kvgate (or raise --index-capacity) to size it for this fleet");
    watch.added("c", [{ totalKvBlocks: 100, kvEvents: true }]);
    expect(counted).toBe(1);
  });
});
