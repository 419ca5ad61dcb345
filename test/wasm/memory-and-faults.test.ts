import { describe, it, expect } from "vitest";
import { KvIndex } from "../../src/core/kv-index.ts";
import { loadCoreModule } from "../../src/wasm/module-fs.ts";
import { WasmTrapError } from "../../src/core/errors.ts";
import { EventBatchWriter } from "../../src/core/event-encoder.ts";
import { budgetBytes, resolveOptions } from "../../src/core/kv-index-options.ts";
import { hashPromptReference } from "../../src/reference/block-hash-reference.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";
import * as hooks from "../support/kv-index-hooks.ts";
import { Counter } from "../../src/wasm/abi.ts";

const mk = async (o: ConstructorParameters<typeof KvIndex>[1] = {}) => new KvIndex(await loadCoreModule("release"), { capacity: 4096, maxSlots: 8, ...o });

describe("memory growth", () => {
  it("should grow the prompt regions for a longer prompt, refresh its views, and keep hashing and matching right", async () => {
    const idx = await mk({ promptTokens: 64, maxPromptTokens: 1 << 16 });
    const rnd = seededRandom(9);
    const short = Array.from({ length: 48 }, () => rnd.u32());
    const shortSeq = idx.hash(short, { blockSize: 16 }).seq;
    hooks.recordHashes(idx, "w", 0, shortSeq, 1, 10_000);
    const before = idx.stats().wasmBytes;
    const long = new Uint32Array(40_000);
    long.set(short);
    for (let i = short.length; i < long.length; i++) long[i] = rnd.u32();
    const h = idx.hash(long, { blockSize: 16 });
    expect(idx.stats().wasmBytes).toBeGreaterThan(before);
    expect(h).toEqual(hashPromptReference(long, { blockSize: 16 }));
    // The index content survived the growth and is read through fresh views.
    expect(hooks.findMatches(idx, long, { blockSize: 16 }).matches).toEqual([{ worker: "w", dpRank: 0, blocks: 3, treeSize: 3 }]);
    expect(hooks.treeSize(idx, "w", 0)).toBe(3);
  });

  it("should refuse a prompt longer than maxPromptTokens with a typed error and no growth", async () => {
    const idx = await mk({ promptTokens: 64, maxPromptTokens: 1000 });
    const before = idx.stats().wasmBytes;
    expect(() => idx.hash(new Uint32Array(1001), { blockSize: 16 })).toThrow(expect.objectContaining({ code: "KVGATE_ERR_PROMPT_TOO_LONG" }));
    expect(idx.stats().wasmBytes).toBe(before);
  });

  it("should stay within the memory budget its options imply", async () => {
    const o = { capacity: 50_000, maxSlots: 130, promptTokens: 1024, maxPromptTokens: 100_000 };
    const idx = await mk(o);
    const rnd = seededRandom(4);
    for (let i = 0; i < 20; i++) idx.hash(new Uint32Array(1 + rnd.int(100_000)), { blockSize: 16 });
    for (let k = 0; k < 200; k++) {
      const blocks = Array.from({ length: 400 }, () => ({ hash: rnd.u64(), local: rnd.u64() }));
      hooks.stored(idx, `w${k % 130}`, 0, null, blocks);
    }
    expect(idx.stats().entries).toBeLessThanOrEqual(50_000);
    expect(idx.stats().wasmBytes).toBeLessThanOrEqual(budgetBytes(resolveOptions(o)) + 65536);
  });
});

describe("capacity", () => {
  it("should reject a Stored event that does not fit, leaving the index untouched", async () => {
    const idx = await mk({ capacity: 10 });
    const rnd = seededRandom(1);
    const a = Array.from({ length: 8 }, () => ({ hash: rnd.u64(), local: rnd.u64() }));
    expect(hooks.stored(idx, "w", 0, null, a)).toBe("applied");
    const b = Array.from({ length: 3 }, () => ({ hash: rnd.u64(), local: rnd.u64() }));
    expect(hooks.stored(idx, "w", 0, null, b)).toBe("capacity");
    expect(hooks.treeSize(idx, "w", 0)).toBe(8);
    expect(idx.counters().capacity).toBe(1);
  });

  it("should evict approximate blocks, earliest expiry first, to make room for engine events", async () => {
    const idx = await mk({ capacity: 10 });
    const rnd = seededRandom(2);
    hooks.recordHashes(idx, "a", 0, [1n, 2n, 3n, 4n], 1000, 50_000);
    hooks.recordHashes(idx, "b", 0, [5n, 6n, 7n, 8n], 2000, 50_000);
    const blocks = Array.from({ length: 5 }, () => ({ hash: rnd.u64(), local: rnd.u64() }));
    expect(hooks.stored(idx, "w", 0, null, blocks)).toBe("applied");
    expect(hooks.treeSize(idx, "w", 0)).toBe(5);
    // Three blocks had to go: a's, deepest first (a holds its first block only).
    expect(hooks.treeSize(idx, "a", 0)).toBe(1);
    expect(hooks.treeSize(idx, "b", 0)).toBe(4);
    expect(idx.counters().evicted).toBe(3);
  });

  it("should prune approximate blocks to the target ratio, deepest first on equal expiry", async () => {
    const idx = await mk({ approxMaxBlocks: 10, pruneTargetRatio: 0.5 });
    hooks.recordHashes(idx, "a", 0, Array.from({ length: 11 }, (_, i) => BigInt(i + 1)), 0, 1000);
    expect(idx.stats().ttlEntries).toBe(5);
    expect(hooks.findMatchesByHashes(idx, Array.from({ length: 11 }, (_, i) => BigInt(i + 1))).matches[0]!.blocks).toBe(5);
    expect(idx.expire(999)).toBe(0);
    expect(idx.expire(1000)).toBe(5);
  });
});

describe("bad input", () => {
  it("should stop at a corrupt record, apply the records before it, and report its offset", async () => {
    const idx = await mk();
    const slot = idx.slotFor("w", 0);
    const w = new EventBatchWriter();
    w.stored(slot, null, [11n, 12n], [101n, 102n]);
    const good = w.byteLength;
    w.removed(slot, [11n]);
    const bytes = w.bytes().slice();
    bytes[good] = 99; // unknown kind
    expect(idx.applyBatch(bytes)).toEqual({ records: -1, corruptAt: good });
    expect(hooks.treeSize(idx, "w", 0)).toBe(2);
    // A truncated record is corrupt too, and applies nothing of itself.
    w.reset();
    w.removed(slot, [11n, 12n]);
    expect(idx.applyBatch(w.bytes().slice(0, w.byteLength - 4))).toEqual({ records: -1, corruptAt: 0 });
    expect(hooks.treeSize(idx, "w", 0)).toBe(2);
    expect(idx.counters().corrupt).toBe(2);
  });

  it("should hash token ids of STORED_TOKENS records inside the core exactly as the prompt hash does", async () => {
    const idx = await mk();
    const slot = idx.slotFor("w", 0);
    const tokens = Array.from({ length: 64 }, (_, i) => i * 7 + 1);
    const w = new EventBatchWriter();
    w.storedTokens(slot, null, [1n, 2n, 3n, 4n], tokens, 16, idx.seedFor({ lora: "x" }));
    expect(idx.applyBatch(w.bytes())).toEqual({ records: 1 });
    const m = hooks.findMatches(idx, tokens, { blockSize: 16, lora: "x" });
    expect(m.matches).toEqual([{ worker: "w", dpRank: 0, blocks: 4, treeSize: 4 }]);
    expect(hooks.findMatches(idx, tokens, { blockSize: 16 }).matches).toEqual([]);
  });

  it("should reject a long Stored event with one repeated hash and accept it without the repeat", async () => {
    const idx = await mk({ capacity: 10_000 });
    const rnd = seededRandom(12);
    const blocks = Array.from({ length: 3000 }, () => ({ hash: rnd.u64(), local: rnd.u64() }));
    const dup = [...blocks];
    dup[2999] = { ...dup[2999]!, hash: dup[17]!.hash };
    expect(hooks.stored(idx, "w", 0, null, dup)).toBe("invalid_sequence");
    expect(hooks.treeSize(idx, "w", 0)).toBe(0);
    const slot = idx.slotFor("w", 0);
    const w = new EventBatchWriter();
    w.stored(slot, null, dup.map((b) => b.hash), dup.map((b) => b.local));
    expect(idx.applyBatch(w.bytes())).toEqual({ records: 1 });
    expect(idx.counters().invalid).toBe(2);
    expect(hooks.stored(idx, "w", 0, null, blocks)).toBe("applied");
    expect(hooks.treeSize(idx, "w", 0)).toBe(3000);
    // Repeating the check many times reuses the stamped set without clearing it.
    for (let k = 0; k < 50; k++) expect(hooks.stored(idx, "w", 0, blocks[2999]!.hash, [{ hash: rnd.u64(), local: rnd.u64() }, ...blocks.slice(0, 30)])).toBe("applied");
  });

  it("should find a repeated hash in Stored events of every length, long and short ones interleaved", async () => {
    const idx = await mk({ capacity: 1 << 16 });
    const rnd = seededRandom(31);
    let held = 0;
    for (let k = 0; k < 400; k++) {
      // Lengths from 2 to ~600, so the duplicate set is used at many sizes over records stamped by longer events.
      const n = 2 + (k % 3 === 0 ? rnd.int(600) : rnd.int(40));
      const blocks = Array.from({ length: n }, () => ({ hash: rnd.u64(), local: rnd.u64() }));
      if (k % 2 === 0) {
        const i = rnd.int(n - 1), j = i + 1 + rnd.int(n - 1 - i);
        const dup = [...blocks];
        dup[j] = { ...dup[j]!, hash: dup[i]!.hash };
        expect(hooks.stored(idx, "w", 0, null, dup), `length ${n}, blocks ${i} and ${j}`).toBe("invalid_sequence");
      } else {
        expect(hooks.stored(idx, "w", 0, null, blocks), `length ${n}`).toBe("applied");
        held += n;
      }
    }
    expect(idx.stats().entries).toBe(held);
    expect(idx.counters().invalid).toBe(200);
  });

  it("should count events for a closed slot without touching the index", async () => {
    const idx = await mk();
    const w = new EventBatchWriter();
    w.stored(5, null, [1n], [2n]).removed(6, [1n]).cleared(7);
    expect(idx.applyBatch(w.bytes())).toEqual({ records: 3 });
    expect(idx.counters().badSlot).toBe(3);
    expect(idx.stats().entries).toBe(0);
  });

  it("should refuse a batch larger than the event buffer", async () => {
    const idx = await mk({ eventBytes: 64 });
    expect(() => idx.applyBatch(new Uint8Array(65))).toThrow(expect.objectContaining({ code: "KVGATE_ERR_BAD_ARGUMENT" }));
  });
});

describe("trap recovery", () => {
  it("should turn a trap into WasmTrapError, rebuild the instance empty, keep the slot map and keep working", async () => {
    const idx = await mk();
    const resets: WasmTrapError[] = [];
    idx.onReset = (e) => resets.push(e);
    hooks.recordHashes(idx, "w", 0, [1n, 2n], 0, 1000);
    expect(hooks.treeSize(idx, "w", 0)).toBe(2);
    let caught: unknown;
    try {
      hooks.induceTrap(idx);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(WasmTrapError);
    expect((caught as WasmTrapError).code).toBe("KVGATE_ERR_WASM_TRAP");
    expect(idx.generation).toBe(1);
    expect(resets).toHaveLength(1);
    expect(hooks.treeSize(idx, "w", 0)).toBe(0);
    expect(hooks.recordHashes(idx, "w", 0, [1n, 2n, 3n], 0, 1000)).toBe(3);
    expect(hooks.findMatchesByHashes(idx, [1n, 2n, 3n]).matches).toEqual([{ worker: "w", dpRank: 0, blocks: 3, treeSize: 3 }]);
  });

  it("should count past the core's u32 counters wrapping and across a rebuild, never going back", async () => {
    const idx = await mk();
    const applied = (): number => idx.counters().applied;
    const setCore = (v: number): void => idx.withCore("test", (c) => void (new Uint32Array(c.memory.buffer)[(c.counters_ptr() >>> 2) + Counter.applied] = v));
    hooks.stored(idx, "w", 0, null, [{ hash: 1n, local: 1n }]);
    expect(applied()).toBe(1);
    // The core's counter just under 2^32, as after days of events; then events take it over and it wraps.
    setCore(2 ** 32 - 3);
    expect(applied()).toBe(2 ** 32 - 3);
    for (let i = 0; i < 5; i++) hooks.stored(idx, "w", 0, null, [{ hash: 10n + BigInt(i), local: 1n }]);
    expect(idx.withCore("test", (c) => new Uint32Array(c.memory.buffer)[(c.counters_ptr() >>> 2) + Counter.applied])).toBe(2);
    expect(applied()).toBe(2 ** 32 + 2);
    // A trap rebuilds the core, whose counters start at zero: the totals carry on.
    expect(() => hooks.induceTrap(idx)).toThrow(WasmTrapError);
    expect(applied()).toBe(2 ** 32 + 2);
    hooks.stored(idx, "w", 0, null, [{ hash: 99n, local: 1n }]);
    expect(applied()).toBe(2 ** 32 + 3);
  });
});

describe("phase-split access", () => {
  it("should hash and match in two calls with the same result as route, and copy sequence hashes without BigInts", async () => {
    const idx = await mk();
    const tokens = new Uint32Array(Array.from({ length: 100 }, (_, i) => i * 3));
    const { seq } = idx.hash(tokens, { blockSize: 16 });
    hooks.recordHashes(idx, "a", 0, seq.slice(0, 4), 0, 1000);
    expect(hooks.hashOnly(idx, tokens, { blockSize: 16 })).toBe(6);
    expect(hooks.matchLast(idx)).toBe(1);
    expect([idx.matches.slot(0), idx.matches.depth(0)]).toEqual([idx.slots.get("a", 0), 4]);
    const out = new BigUint64Array(6);
    expect(idx.lastSequenceWordsInto(new Uint32Array(out.buffer))).toBe(6);
    expect(Array.from(out)).toEqual(seq);
    expect(idx.treeSizeOfSlot(idx.slots.get("a", 0)!)).toBe(4);
    expect(() => idx.lastSequenceWordsInto(new Uint32Array(4))).toThrow(expect.objectContaining({ code: "KVGATE_ERR_BAD_ARGUMENT" }));
  });
});

describe("no hidden allocation", () => {
  it.each(["release", "release-simd"] as const)("should leave the index intact after thousands of hashing calls on every path of the %s build (the stub runtime's allocator would write over it)", async (variant) => {
    const idx = new KvIndex(await loadCoreModule(variant), { capacity: 50_000, maxSlots: 8 });
    const rnd = seededRandom(77);
    const t = Uint32Array.from({ length: 4096 }, () => rnd.int(150_000));
    const { local, seq } = idx.hash(t, { blockSize: 16 });
    hooks.stored(idx, "a", 0, null, local.map((l, i) => ({ hash: seq[i]! ^ 9n, local: l })));
    for (let k = 0; k < 3000; k++) {
      const bs = [16, 64, 15, 32][k % 4]!;
      const p = Uint32Array.from({ length: 200 + rnd.int(600) }, () => rnd.u32());
      idx.hash(p, { blockSize: bs, eagle: k % 5 === 0, lora: k % 7 === 0 ? `l${k % 3}` : undefined, multimodal: k % 11 === 0 ? [{ block: 1, hash: rnd.u64() }] : undefined });
      idx.route(p, { blockSize: bs });
    }
    expect(hooks.findMatches(idx, t, { blockSize: 16 }).matches).toEqual([{ worker: "a", dpRank: 0, blocks: 256, treeSize: 256 }]);
    expect(idx.stats().nodes).toBe(256);
  });
});
