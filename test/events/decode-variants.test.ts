import { beforeAll, describe, expect, it } from "vitest";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import { CacheSalts } from "../../src/core/cache-salt.ts";
import type { KvIndex } from "../../src/core/kv-index.ts";
import { decodeKvEventBatch } from "../../src/events/kv-event-decode.ts";
import { KvEventStream, type KvEventStreamOptions } from "../../src/events/kv-event-stream.ts";
import {
  ALL_BLOCKS_CLEARED, blockRemoved, captureStored, derivedVectors, hex, loadCapture, pack, vllmBatch,
} from "./helpers.ts";
import * as hooks from "../support/kv-index-hooks.ts";

const capture = loadCapture();
const vectors = derivedVectors();
const T = capture.tokens;
let index: KvIndex;
let n = 0;

beforeAll(async () => {
  index = await createKvIndex({ maxSlots: 64, capacity: 8192 });
});

/** A fresh worker's stream; each test uses its own worker so they do not see each other's blocks. */
function stream(opts: Partial<KvEventStreamOptions> = {}): KvEventStream {
  return new KvEventStream(index, { worker: `w${n++}`, blockSize: 16, ...opts });
}

function depth(s: KvEventStream, tokens = T, opts: { lora?: string; namespace?: string; eagle?: boolean; rank?: number } = {}): number {
  const m = hooks.findMatches(index, tokens, new CacheSalts((b, seed) => index.xxh3(b, seed)).options(16, opts.lora, opts.namespace, opts.eagle)).matches
    .find((x) => x.worker === s.worker && x.dpRank === (opts.rank ?? 0));
  return m?.blocks ?? 0;
}

const TS = 1_700_000_000.5;
/** Legacy positional BlockStored with every field through kv_cache_spec_kind (12 elements), plus trailing extras. */
function storedArray(hashes: unknown[], parent: unknown, tokens: unknown[], fields: unknown[] = []): unknown[] {
  return ["BlockStored", hashes, parent, tokens, 16, ...fields];
}

describe("golden frames (derived_vectors.json msgpack_frames_hex)", () => {
  for (const form of ["legacy_array", "map"] as const) {
    it(`should decode the ${form} batch and apply Stored, Removed and Cleared in order`, () => {
      const bytes = hex(vectors.framesHex[form]);
      const d = decodeKvEventBatch(bytes);
      expect(d.events.map((e) => e.type)).toEqual(["BlockStored", "BlockRemoved", "AllBlocksCleared"]);
      expect(d.events[0]).toMatchObject({ block_hashes: capture.hashes.slice(0, 2), parent_block_hash: null, token_ids: T.slice(0, 32), block_size: 16, medium: "GPU" });
      expect(d.data_parallel_rank).toBe(0);
      const s = stream();
      s.onBatch(0, bytes);
      expect(s.counters).toMatchObject({ batches: 1, storedEvents: 1, removedEvents: 1, clearedEvents: 1, blocksStored: 2, blocksRemoved: 1, corruptFrames: 0 });
      expect(depth(s)).toBe(0);
    });
  }
});

describe("batch envelope", () => {
  it("should take the dp rank from an array batch, and the stream's when the batch has none ([ts, events])", () => {
    const s = stream({ dpRank: 1 });
    s.onBatch(0, vllmBatch([captureStored(capture, { blocks: 3 })], "array", 3));
    s.onBatch(1, pack([TS, [["BlockStored", capture.hashes.slice(0, 2), null, T.slice(0, 32), 16, null, "GPU"]]]));
    expect(depth(s, T, { rank: 3 })).toBe(3);
    expect(depth(s, T, { rank: 1 })).toBe(2);
  });

  it("should read a map batch (EventBatch without array_like) and SGLang's attn_dp_rank", () => {
    const s = stream();
    s.onBatch(0, pack({ ts: TS, events: [{ type: "BlockStored", block_hashes: capture.hashes.slice(0, 4), parent_block_hash: null, token_ids: T.slice(0, 64), block_size: 16 }], data_parallel_rank: 2 }));
    s.onBatch(1, pack({ events: [storedArray(capture.hashes.slice(0, 5), null, T.slice(0, 80))], attn_dp_rank: 5, ts: TS, extra: [1, 2] }));
    expect(depth(s, T, { rank: 2 })).toBe(4);
    expect(depth(s, T, { rank: 5 })).toBe(5);
    expect(s.counters.corruptFrames).toBe(0);
  });

  it("should accept an integer ts and trailing batch fields", () => {
    const s = stream();
    s.onBatch(0, pack([1_700_000_000, [storedArray([1n, 2n], null, T.slice(0, 32))], 0, "future"]));
    expect(depth(s)).toBe(2);
  });
});

describe("event encodings", () => {
  it("should read legacy positional events of every historical length (5 to 12+ elements)", () => {
    const lengths = [
      [],                                        // v0.9: [tag, hashes, parent, tokens, bs]
      [null],                                    // + lora_id (SGLang's old shape)
      [null, "GPU"],                             // + medium
      [null, "GPU", null],                       // + lora_name
      [null, "GPU", null, [null, null]],         // + extra_keys
      [null, "GPU", null, [null, null], 0],      // + group_idx
      [null, "GPU", null, [null, null], 0, "full_attention", null, "later-field"],
    ];
    for (const fields of lengths) {
      const s = stream();
      s.onBatch(0, pack([TS, [storedArray(capture.hashes.slice(0, 2), null, T.slice(0, 32), fields)], 0]));
      expect(depth(s), `fields ${JSON.stringify(fields)}`).toBe(2);
      s.onBatch(1, pack([TS, [["BlockRemoved", [capture.hashes[1]!], "GPU", 0, "later"]], 0]));
      expect(depth(s)).toBe(1);
    }
  });

  it("should read tagged map events with keys in any order and unknown keys", () => {
    const s = stream();
    const ev = { token_ids: T.slice(0, 48), future_field: { a: [1, 2, 3] }, block_size: 16, block_hashes: capture.hashes.slice(0, 3), parent_block_hash: null, type: "BlockStored", cache_salt: null };
    s.onBatch(0, pack([TS, [ev], 0]));
    expect(depth(s)).toBe(3);
    s.onBatch(1, pack([TS, [{ block_hashes: [capture.hashes[2]!], type: "BlockRemoved", group_idx: 0 }], 0]));
    expect(depth(s)).toBe(2);
    s.onBatch(2, pack([TS, [{ type: "AllBlocksCleared" }], 0]));
    expect(depth(s)).toBe(0);
  });

  it("should chain a Stored event onto the previous one through parent_block_hash", () => {
    for (const form of ["array", "map"] as const) {
      const s = stream();
      s.onBatch(0, vllmBatch([captureStored(capture, { blocks: 10 }), captureStored(capture, { from: 10, blocks: 15 })], form));
      expect(depth(s)).toBe(25);
      expect(index.counters().parentMissing).toBe(0);
    }
  });

  it("should skip unknown event tags, count them, and apply the rest of the batch", () => {
    const s = stream();
    s.onBatch(0, pack([TS, [["CacheStoreCommitted", 1, 2], storedArray(capture.hashes.slice(0, 2), null, T.slice(0, 32)), { type: "TransferInitiated", x: 1 }, { no_type: true }], 0]));
    expect(s.counters).toMatchObject({ unknownEvents: 3, storedEvents: 1, corruptFrames: 0 });
    expect(depth(s)).toBe(2);
  });
});

describe("block hashes", () => {
  it("should read uint64 hashes above 2^63 and small ones in msgspec's shortest form", () => {
    const s = stream();
    const hashes = [0xffffffffffffffffn, 5n, 70_000n, 0x1_0000_0000n];
    s.onBatch(0, vllmBatch([{ ...captureStored(capture, { blocks: 4 }), block_hashes: hashes }]));
    expect(depth(s)).toBe(4);
    s.onBatch(1, vllmBatch([blockRemoved([0x1_0000_0000n])]));
    expect(depth(s)).toBe(3);
    expect(decodeKvEventBatch(vllmBatch([blockRemoved(hashes)])).events[0]).toMatchObject({ block_hashes: hashes });
  });

  it("should fold SGLang's signed int64 hashes to uint64 so Removed finds what Stored put", () => {
    const signed = vectors.sglangInt64.slice(0, 25);
    expect(signed.some((h) => h < 0n)).toBe(true);
    const s = stream();
    s.onBatch(0, pack([TS, [["BlockStored", signed, null, T, 16, null]], 0]));
    expect(depth(s)).toBe(25);
    // The same values as unsigned (two's complement) remove them: one id, two spellings.
    s.onBatch(1, pack([TS, [["BlockRemoved", signed.slice(20).map((h) => BigInt.asUintN(64, h))]], 0]));
    expect(depth(s)).toBe(20);
    s.onBatch(2, pack([TS, [["BlockRemoved", signed.slice(10, 20).map((h) => Number(h) === Number(BigInt.asIntN(32, h)) ? Number(h) : h)]], 0]));
    expect(depth(s)).toBe(10);
    expect(index.counters().unknownRemoved).toBe(0);
  });

  it("should fold 32-byte bin digests to their last 8 bytes, vLLM's rule (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0)", () => {
    const digests = vectors.digestsHex.map(hex);
    const d = decodeKvEventBatch(pack([TS, [["BlockStored", digests, null, T.slice(0, 48), 16, null, "GPU"]], 0]));
    expect((d.events[0] as { block_hashes: bigint[] }).block_hashes).toEqual(capture.hashes.slice(0, 3));
    const s = stream();
    s.onBatch(0, pack([TS, [["BlockStored", digests.slice(0, 2), null, T.slice(0, 32), 16, null, "GPU"]], 0]));
    // The next event names its parent as a uint64 while the blocks came as bin: same id.
    s.onBatch(1, pack([TS, [["BlockStored", [digests[2]!], capture.hashes[1]!, T.slice(32, 48), 16, null, "GPU"]], 0]));
    expect(depth(s)).toBe(3);
  });
});

describe("token ids", () => {
  it("should index EAGLE bigram token pairs with EAGLE hash windows", () => {
    const s = stream();
    const flat = T.slice(0, 3 * 16 + 1);
    const pairs = flat.slice(0, -1).map((t, i) => [t, flat[i + 1]!]);
    s.onBatch(0, pack([TS, [["BlockStored", capture.hashes.slice(0, 3), null, pairs, 16, null, "GPU"]], 0]));
    expect(s.counters).toMatchObject({ storedEvents: 1, blocksStored: 3, droppedTokenCount: 0 });
    expect(depth(s, T, { eagle: true })).toBe(3);
    expect(depth(s, T)).toBe(0);
    const d = decodeKvEventBatch(pack([TS, [["BlockStored", [1n], null, pairs.slice(0, 16), 16]], 0]));
    expect((d.events[0] as { token_ids: number[] }).token_ids).toEqual(flat.slice(0, 17));
  });

  it("should read token ids in every integer width", () => {
    const s = stream();
    const tokens = [0, 127, 128, 255, 256, 65_535, 65_536, 4_294_967_295, ...T.slice(8, 16)];
    s.onBatch(0, pack([TS, [storedArray([9n], null, tokens)], 0]));
    expect(depth(s, tokens)).toBe(1);
  });
});

describe("LoRA adapters", () => {
  it("should seed the block hashes with lora_name so only requests for that adapter match", () => {
    for (const form of ["array", "map"] as const) {
      const s = stream();
      s.onBatch(0, vllmBatch([captureStored(capture, { lora: "Alice" })], form));
      expect(depth(s, T, { lora: "Alice" })).toBe(25);
      expect(depth(s, T)).toBe(0);
      expect(depth(s, T, { lora: "Bob" })).toBe(0);
    }
  });

  it("should accept extra_keys that only name the adapter or a root's cache_salt, and drop blocks whose extra_keys carry more", () => {
    const s = stream();
    const ev = (extra: unknown[]): unknown => ({ type: "BlockStored", block_hashes: [11n, 12n], parent_block_hash: null, token_ids: T.slice(0, 32), block_size: 16, lora_id: 1, lora_name: "Alice", extra_keys: extra });
    s.onBatch(0, pack([TS, [ev([["Alice"], ["Alice"]])], 0]));
    expect(depth(s, T, { lora: "Alice" })).toBe(2);
    const t = stream();
    // One more string in a root's first block is vLLM's cache_salt: indexed under that namespace only.
    t.onBatch(0, pack([TS, [ev([["Alice", "a3f5".repeat(16)], ["Alice"]]), ev([["Alice", ["img", 0]], null]),
      ev([["Alice"], ["Alice", "x"]])], 0]));
    expect(t.counters).toMatchObject({ droppedExtraKeys: 2, storedEvents: 1 });
    expect(depth(t, T, { lora: "Alice" })).toBe(0);
    expect(depth(t, T, { lora: "Alice", namespace: "a3f5".repeat(16) })).toBe(2);
  });

  it("should drop a legacy event with lora_id but no lora_name (the adapter is unknown)", () => {
    const s = stream();
    s.onBatch(0, pack([TS, [storedArray(capture.hashes.slice(0, 2), null, T.slice(0, 32), [7, "GPU", null])], 0]));
    expect(s.counters).toMatchObject({ droppedLora: 1, storedEvents: 0 });
    expect(depth(s)).toBe(0);
  });
});

describe("storage tiers, KV-cache groups, block sizes", () => {
  it("should index only the device tier by default and count every tier", () => {
    const s = stream();
    const media = [null, "GPU", "cuda", "CPU", "CPU_PINNED", "DISK", "NVME", "REMOTE", "SomethingNew"];
    s.onBatch(0, vllmBatch(media.map((m, i) => captureStored(capture, { from: i, blocks: 1, medium: m }))));
    expect(s.counters).toMatchObject({ deviceEvents: 3, hostEvents: 2, diskEvents: 2, externalEvents: 2, droppedTier: 6, storedEvents: 3 });
    expect(depth(s)).toBe(3);
    // A Removed on the host tier must not evict the device copy of the same hash.
    s.onBatch(1, vllmBatch([{ ...blockRemoved([capture.hashes[0]!]), medium: "CPU" }]));
    expect(depth(s)).toBe(3);
  });

  it("should record configured tier weights (for a tier-aware scorer) while still indexing only the device tier", () => {
    const s = stream({ tierWeights: { host: 0.5, disk: 0.1 } });
    expect(s.policy.tierWeights).toEqual({ device: 1, host: 0.5, disk: 0.1, external: 0 });
    s.onBatch(0, vllmBatch([captureStored(capture, { blocks: 2, medium: "CPU" })]));
    expect(depth(s)).toBe(0);
  });

  it("should use only full-attention groups, and only the configured group_idx when set", () => {
    const s = stream();
    const ev = (group: number, kind: string | null, from: number): unknown =>
      ({ type: "BlockStored", block_hashes: [capture.hashes[from]!], parent_block_hash: from ? capture.hashes[from - 1]! : null, token_ids: T.slice(from * 16, from * 16 + 16), block_size: 16, group_idx: group, kv_cache_spec_kind: kind });
    s.onBatch(0, pack([TS, [ev(0, "full_attention", 0), ev(1, "sliding_window", 1), ev(2, null, 1)], 0]));
    expect(s.counters).toMatchObject({ droppedGroup: 1, storedEvents: 2 });
    expect(depth(s)).toBe(2);
    const g = stream({ kvGroup: 1 });
    g.onBatch(0, pack([TS, [ev(0, "full_attention", 0), ev(1, "full_attention", 0)], 0]));
    expect(g.counters).toMatchObject({ droppedGroup: 1, storedEvents: 1 });
  });

  it("should drop a Stored event whose block size differs from the worker's and leave the index unchanged", () => {
    const s = stream();
    const before = index.stats().entries;
    s.onBatch(0, pack([TS, [["BlockStored", capture.hashes.slice(0, 2), null, T.slice(0, 64), 32, null, "GPU"]], 0]));
    s.onBatch(1, pack([TS, [["BlockStored", capture.hashes.slice(0, 2), null, T.slice(0, 31), 16, null, "GPU"]], 0]));
    s.onBatch(2, pack([TS, [["BlockStored", capture.hashes.slice(0, 2), null, T.slice(0, 32), null, null, "GPU"]], 0]));
    expect(s.counters).toMatchObject({ droppedBlockSize: 1, droppedTokenCount: 1, storedEvents: 1, batches: 3 });
    expect(index.stats().entries).toBe(before + 2);
  });

  it("should split a Stored event larger than the core's event buffer into chained records", async () => {
    const small = await createKvIndex({ maxSlots: 2, capacity: 4096, eventBlocks: 8, eventBytes: 1024 });
    const s = new KvEventStream(small, { worker: "big", blockSize: 16 });
    s.onBatch(0, vllmBatch([captureStored(capture)]));
    s.onBatch(1, vllmBatch([blockRemoved(capture.hashes.slice(0, 25).reverse().slice(0, 20))]));
    expect(s.counters.applyErrors).toBe(0);
    expect(small.counters()).toMatchObject({ invalid: 0, corrupt: 0, parentMissing: 0 });
    expect(hooks.treeSize(small, "big")).toBe(5);
    expect(hooks.findMatches(small, T, { blockSize: 16 }).matches[0]!.blocks).toBe(5);
  });
});
