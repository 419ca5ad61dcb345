import { describe, expect, it } from "vitest";
import { KvIndex } from "../../src/core/kv-index.ts";
import { loadCoreModule } from "../../src/wasm/module-fs.ts";
import { KvgateError } from "../../src/core/errors.ts";
import * as hooks from "../support/kv-index-hooks.ts";

/** Approximate mode's per-slot capacity: the slot drops routed blocks as an engine's LRU cache would. */

const prompt = (tag: number, n: number): bigint[] => Array.from({ length: n }, (_, i) => BigInt(tag) * 1000n + BigInt(i) + 1n);

async function index(): Promise<KvIndex> {
  return new KvIndex(await loadCoreModule("release"), { maxSlots: 8, capacity: 4096, promptTokens: 256, eventBlocks: 64 });
}

const depthOn = (idx: KvIndex, seqs: bigint[], worker: string): number =>
  hooks.findMatchesByHashes(idx, seqs).matches.find((m) => m.worker === worker)?.blocks ?? 0;

describe("slot capacity in approximate mode", () => {
  it("should drop the least recently routed prompt first, its deepest block before its first", async () => {
    const idx = await index();
    const a = prompt(1, 4), b = prompt(2, 4);
    hooks.recordHashes(idx, "w0", 0, a, 1_000, 600_000);
    hooks.recordHashes(idx, "w0", 0, b, 2_000, 600_000);
    // Eight blocks held; six allowed: A, the older prompt, loses its two deepest blocks and keeps its prefix.
    expect(idx.setSlotCapacity("w0", 0, 6)).toBe(2);
    expect(depthOn(idx, a, "w0")).toBe(2);
    expect(depthOn(idx, b, "w0")).toBe(4);
    expect(idx.counters().capped).toBe(2);
  });

  it("should count a routed prompt's blocks as used again, so the other prompt goes first", async () => {
    const idx = await index();
    const a = prompt(1, 4), b = prompt(2, 4), c = prompt(3, 3);
    idx.setSlotCapacity("w0", 0, 8);
    hooks.recordHashes(idx, "w0", 0, a, 1_000, 600_000);
    hooks.recordHashes(idx, "w0", 0, b, 2_000, 600_000);
    hooks.recordHashes(idx, "w0", 0, a.slice(0, 3), 3_000, 600_000);
    // C needs three blocks: A's fourth (unused since A first ran) and B's two deepest go; A's prefix was just used.
    hooks.recordHashes(idx, "w0", 0, c, 4_000, 600_000);
    expect(depthOn(idx, c, "w0")).toBe(3);
    expect(depthOn(idx, a, "w0")).toBe(3);
    expect(depthOn(idx, b, "w0")).toBe(2);
    expect(hooks.treeSize(idx, "w0")).toBe(8);
  });

  it("should bound each slot on its own, and grow again once the bound is lifted", async () => {
    const idx = await index();
    const a = prompt(1, 5);
    hooks.recordHashes(idx, "w0", 0, a, 1_000, 600_000);
    hooks.recordHashes(idx, "w1", 0, a, 1_000, 600_000);
    expect(idx.setSlotCapacity("w0", 0, 2)).toBe(3);
    expect(depthOn(idx, a, "w0")).toBe(2);
    expect(depthOn(idx, a, "w1")).toBe(5);
    // Lifting the bound keeps what is left and lets the slot grow again.
    expect(idx.setSlotCapacity("w0", 0, 0)).toBe(0);
    hooks.recordHashes(idx, "w0", 0, a, 2_000, 600_000);
    expect(depthOn(idx, a, "w0")).toBe(5);
  });

  it("should start a slot that a new worker reuses without the old bound", async () => {
    const idx = await index();
    hooks.recordHashes(idx, "w0", 0, prompt(1, 3), 1_000, 600_000);
    idx.setSlotCapacity("w0", 0, 1);
    idx.removeWorker("w0");
    hooks.recordHashes(idx, "w9", 0, prompt(2, 6), 2_000, 600_000);
    expect(hooks.treeSize(idx, "w9")).toBe(6);
  });

  it("should refuse a capacity that is not a block count", async () => {
    const idx = await index();
    expect(() => idx.setSlotCapacity("w0", 0, -1)).toThrow(KvgateError);
    expect(() => idx.setSlotCapacity("w0", 0, 1.5)).toThrow(KvgateError);
  });
});
