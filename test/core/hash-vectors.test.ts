import { describe, it, expect, beforeAll } from "vitest";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import type { KvIndex } from "../../src/core/kv-index.ts";
import { hashPromptReference, seedReference } from "../../src/reference/block-hash-reference.ts";
import { xxh3Reference } from "../../src/reference/xxh3-reference.ts";

const enc = new TextEncoder();
let idx: KvIndex;
beforeAll(async () => {
  idx = await createKvIndex({ capacity: 1024, maxSlots: 4 });
});

const both = (tokens: number[], opts: Parameters<KvIndex["hash"]>[1]) => {
  const w = idx.hash(tokens, opts);
  const r = hashPromptReference(tokens, opts);
  expect(w).toEqual(r);
  return w;
};

describe("reference vectors (dynamo-kv-router.md §1.4)", () => {
  it("should hash bytes 'test data' with seed 1337", () => {
    expect(idx.xxh3(enc.encode("test data"), 1337n)).toBe(13226331709069118873n);
    expect(xxh3Reference(enc.encode("test data"), 1337n)).toBe(13226331709069118873n);
  });

  it("should produce the local and chained hashes of tokens 1..12 at block size 4", () => {
    const { local, seq } = both([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], { blockSize: 4 });
    expect(local).toEqual([14643705804678351452n, 16777012769546811212n, 483935686894639516n]);
    expect(seq).toEqual([14643705804678351452n, 4945711292740353085n, 12583592247330656132n]);
  });

  it("should salt with a LoRA name through the seed", () => {
    expect(both([0, 1, 2, 3], { blockSize: 4 }).local).toEqual([9143094415614847814n]);
    expect(both([0, 1, 2, 3], { blockSize: 4, lora: "adapter-a" }).local).toEqual([6665157333201000639n]);
  });

  it("should salt with a cache namespace through inner seed 1", () => {
    expect(idx.seedFor({ namespace: "tenant-a" })).toBe(1948188790972764086n);
    expect(seedReference(undefined, "tenant-a")).toBe(1948188790972764086n);
    expect(both([0, 1, 2, 3], { blockSize: 4, namespace: "tenant-a" }).local).toEqual([17009624042690211646n]);
  });

  it("should hash tokens 0..15 at block size 16", () => {
    expect(both(Array.from({ length: 16 }, (_, i) => i), { blockSize: 16 }).local).toEqual([15310707395893867146n]);
  });
});

describe("block rules", () => {
  it("should hash only complete blocks", () => {
    for (const bs of [11, 32, 64]) {
      expect(both(Array.from({ length: bs }, (_, i) => i), { blockSize: bs }).local).toHaveLength(1);
      expect(both(Array.from({ length: bs + 1 }, (_, i) => i), { blockSize: bs }).local).toHaveLength(1);
      expect(both(Array.from({ length: 2 * bs + 1 }, (_, i) => i), { blockSize: bs }).local).toHaveLength(2);
      expect(both(Array.from({ length: bs - 1 }, (_, i) => i), { blockSize: bs }).local).toHaveLength(0);
    }
  });

  it("should treat an empty LoRA or namespace as absent and keep LoRA and namespace apart", () => {
    const t = [5, 6, 7, 8];
    const base = both(t, { blockSize: 4 }).local;
    expect(both(t, { blockSize: 4, lora: "" }).local).toEqual(base);
    expect(both(t, { blockSize: 4, namespace: "" }).local).toEqual(base);
    const a = both(t, { blockSize: 4, lora: "a" }).local, b = both(t, { blockSize: 4, lora: "b" }).local;
    const ns = both(t, { blockSize: 4, namespace: "a" }).local;
    expect(new Set([base[0], a[0], b[0], ns[0]]).size).toBe(4);
  });

  it("should cover the next block's first token in Eagle mode", () => {
    const t = [0, 1, 2, 3, 4, 5, 6];
    expect(both(t, { blockSize: 2 }).local).toHaveLength(3);
    const eagle = both(t, { blockSize: 2, eagle: true }).local;
    expect(eagle).toHaveLength(3);
    expect(both([0, 1, 2, 3, 4, 5], { blockSize: 2, eagle: true }).local).toHaveLength(2);
    expect(eagle[0]).toBe(idx.xxh3(new Uint8Array(new Uint32Array([0, 1, 2]).buffer), 1337n));
    expect(eagle[1]).toBe(idx.xxh3(new Uint8Array(new Uint32Array([2, 3, 4]).buffer), 1337n));
  });

  it("should append sorted multimodal hashes to their block only", () => {
    const t = Array.from({ length: 12 }, (_, i) => i + 100);
    const plain = both(t, { blockSize: 4 });
    const mm = both(t, { blockSize: 4, multimodal: [{ block: 1, hash: 9n }, { block: 1, hash: 3n }] });
    expect(mm.local[0]).toBe(plain.local[0]);
    expect(mm.local[2]).toBe(plain.local[2]);
    const bytes = new Uint8Array(16 + 16);
    const v = new DataView(bytes.buffer);
    for (let i = 0; i < 4; i++) v.setUint32(4 * i, t[4 + i]!, true);
    v.setBigUint64(16, 3n, true);
    v.setBigUint64(24, 9n, true);
    expect(mm.local[1]).toBe(idx.xxh3(bytes, 1337n));
    expect(mm.seq[2]).not.toBe(plain.seq[2]);
  });

  it("should reject a bad block size with a typed error", () => {
    expect(() => idx.hash([1, 2, 3], { blockSize: 0 })).toThrow(expect.objectContaining({ code: "KVGATE_ERR_BAD_ARGUMENT" }));
  });
});
