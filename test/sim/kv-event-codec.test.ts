import { describe, it, expect } from "vitest";
import { readFileSync } from "node:fs";
import { encode } from "@msgpack/msgpack";
import { encodeKvEventBatch } from "../../src/sim/kv-event-codec.ts";
import { decodeKvEventBatch } from "../../src/events/kv-event-decode.ts";
import { ALL_BLOCKS_CLEARED, blockRemoved, blockStored, type KvEventBatch } from "../../src/sim/kv-events.ts";

const vectors = JSON.parse(readFileSync(new URL("../fixtures/kv-events/derived_vectors.json", import.meta.url), "utf8"));
const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

// The batch behind test/fixtures/kv-events/derived_vectors.json msgpack_frames_hex (first 32 tokens of the captured
// Qwen3 prompt, the first two captured vLLM block hashes).
const TOKENS = [2082, 1113, 2142, 374, 264, 4948, 19128, 323, 7203, 429, 374, 66351, 938, 315, 11198, 323, 59415, 678, 90505, 11, 54263, 533, 7586, 315, 28922, 13, 1527, 1113, 2142, 6738, 369, 279];
const H1 = 17705339885301241772n, H2 = 13360521540053240825n;
const batch = (): KvEventBatch => ({
  ts: 1700000000.5,
  events: [blockStored(null, [H1, H2], TOKENS, 16), blockRemoved([H1]), ALL_BLOCKS_CLEARED],
  data_parallel_rank: 0,
});

describe("KV event batch encoding", () => {
  it("should reproduce the legacy array-form bytes of the reference vector exactly", () => {
    expect(hex(encodeKvEventBatch(batch(), "array"))).toBe(vectors.msgpack_frames_hex.legacy_array);
  });

  it("should reproduce the map-form (vLLM ≥ 0.26) bytes of the reference vector exactly", () => {
    expect(hex(encodeKvEventBatch(batch(), "map"))).toBe(vectors.msgpack_frames_hex.map);
  });

  it("should write ts as float64 even when it is a whole number", () => {
    const bytes = encodeKvEventBatch({ ts: 1700000000, events: [ALL_BLOCKS_CLEARED], data_parallel_rank: 3 });
    // fixarray(3), float64 0x41d954fc40000000 = 1.7e9
    expect(hex(bytes.subarray(0, 10))).toBe("93cb41d954fc40000000");
    expect(decodeKvEventBatch(bytes).ts).toBe(1700000000);
    expect(decodeKvEventBatch(bytes).data_parallel_rank).toBe(3);
  });

  it("should give hashes msgspec's shortest integer form and keep large ones uint64", () => {
    const small = encodeKvEventBatch({ ts: 1.5, events: [blockRemoved([5n, 70000n, 0xffffffffn, 0x100000000n])], data_parallel_rank: 0 });
    // fixarray(4): 5 → fixint 05, 70000 → uint32 ce 00011170, 2^32−1 → ce ffffffff, 2^32 → uint64 cf 0000000100000000
    expect(hex(small)).toContain("9405ce00011170ceffffffffcf0000000100000000");
  });

  it("should round-trip array and map forms through the decoder", () => {
    for (const form of ["array", "map"] as const) {
      const d = decodeKvEventBatch(encodeKvEventBatch(batch(), form));
      expect(d.skipped).toBe(0);
      expect(d.ts).toBe(1700000000.5);
      expect(d.data_parallel_rank).toBe(0);
      expect(d.events).toEqual(batch().events);
    }
  });
});

describe("KV event batch decoding (shapes other engines send)", () => {
  it("should accept a 2-element batch, negative int64 hashes, bin hashes and unknown tags", () => {
    const bin = new Uint8Array(32);
    bin[31] = 0x2a;
    const raw = encode([2.5, [
      ["BlockStored", [-1n, bin], 7n, [1, 2, 3, 4], 2, null, "GPU"],
      ["CacheStoreCommitted", 1, 2],
      { type: "BlockRemoved", block_hashes: [-2n], medium: "CPU", extra: true },
    ]], { useBigInt64: true });
    const d = decodeKvEventBatch(raw);
    expect(d.data_parallel_rank).toBeNull();
    expect(d.skipped).toBe(1);
    expect(d.events[0]).toMatchObject({ type: "BlockStored", block_hashes: [2n ** 64n - 1n, 42n], parent_block_hash: 7n, token_ids: [1, 2, 3, 4], lora_name: null });
    expect(d.events[1]).toEqual({ type: "BlockRemoved", block_hashes: [2n ** 64n - 2n], medium: "CPU" });
  });

  it("should flatten EAGLE bigram token pairs and accept a map-form batch", () => {
    const raw = encode({ ts: 1.25, events: [{ type: "BlockStored", block_hashes: [9], parent_block_hash: null, token_ids: [[1, 2], [2, 3], [3, 4]], block_size: 3 }], data_parallel_rank: 1 });
    const d = decodeKvEventBatch(raw);
    expect(d.events[0]).toMatchObject({ token_ids: [1, 2, 3, 4], block_hashes: [9n] });
    expect(d.data_parallel_rank).toBe(1);
  });

  it("should reject bytes that are not a batch with KVGATE_ERR_CORRUPT_EVENT", () => {
    expect(() => decodeKvEventBatch(new Uint8Array([0xc1]))).toThrow(expect.objectContaining({ code: "KVGATE_ERR_CORRUPT_EVENT" }));
    expect(() => decodeKvEventBatch(encode([1.0]))).toThrow(expect.objectContaining({ code: "KVGATE_ERR_CORRUPT_EVENT" }));
    expect(() => decodeKvEventBatch(encode([1.0, [["BlockRemoved", "nope"]]]))).toThrow(expect.objectContaining({ code: "KVGATE_ERR_CORRUPT_EVENT" }));
  });
});
