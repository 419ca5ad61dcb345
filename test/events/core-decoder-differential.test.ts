import { describe, expect, it } from "vitest";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import { isKvgateError } from "../../src/core/errors.ts";
import { EngineBatchCodec } from "../../src/core/kv-index-engine-batch.ts";
import type { KvIndex } from "../../src/core/kv-index.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";
import { BatchPreparer } from "../../src/events/batch-preparer.ts";
import { resolvePolicy, type IngestPolicyOptions } from "../../src/events/ingest-policy.ts";
import { KvEventStream } from "../../src/events/kv-event-stream.ts";
import { corrupt, hashPool, randomBatch } from "./random-batches.ts";
import { captureStored, loadCapture, pack, vllmBatch } from "./helpers.ts";
import * as hooks from "../support/kv-index-hooks.ts";

const BS = 16;

type Outcome = { error: string } | { rank: number; slot: number; records: number; events: number; clears: boolean; delta: unknown; bytes: string };

function outcome(p: BatchPreparer, payload: Uint8Array): Outcome {
  try {
    const b = p.prepare(payload);
    return { ...b, bytes: Buffer.from(p.snapshot().bytes).toString("hex") };
  } catch (e) {
    if (!isKvgateError(e)) throw e;
    return { error: e.code };
  }
}

async function pairOfPreparers(policy: IngestPolicyOptions, index?: KvIndex): Promise<{ core: BatchPreparer; host: BatchPreparer; index: KvIndex }> {
  const idx = index ?? (await createKvIndex({ maxSlots: 16, capacity: 1 << 14 }));
  const p = resolvePolicy(policy);
  return { index: idx, core: new BatchPreparer(idx, "w", 0, p), host: new BatchPreparer(idx, "w", 0, p, { coreDecode: false }) };
}

describe("in-core engine batch decoder vs the TypeScript decoder", () => {
  it("should give identical records, counters and ranks for 3,000 random batches in every encoding", async () => {
    for (const policy of [{ blockSize: BS }, { blockSize: BS, kvGroup: 0, dropForeignExtraKeys: false }, { blockSize: BS, tierWeights: { device: 0 } }]) {
      const { core, host } = await pairOfPreparers(policy);
      const r = seededRandom(6_004);
      const pool = hashPool(r, 24);
      let valid = 0;
      for (let i = 0; i < 1_000; i++) {
        const payload = randomBatch(r, { blockSize: BS, pool });
        const want = outcome(host, payload);
        expect(outcome(core, payload), `batch ${i}: ${Buffer.from(payload).toString("hex")}`).toEqual(want);
        if (!("error" in want)) valid++;
      }
      expect(valid).toBeGreaterThan(900);
      // The common shapes are decoded in the core; LoRA names, EAGLE pairs and unusual media go to the host.
      expect(core.stats.core).toBeGreaterThan(300);
      expect(core.stats.host).toBeGreaterThan(100);
      expect(host.stats.core).toBe(0);
    }
  });

  it("should split and merge records like the host when events exceed the core's record limits", async () => {
    const index = await createKvIndex({ maxSlots: 4, capacity: 1 << 14, eventBlocks: 8, eventBytes: 1024 });
    const { core, host } = await pairOfPreparers({ blockSize: BS }, index);
    const r = seededRandom(77);
    const pool = hashPool(r, 16);
    for (let i = 0; i < 400; i++) {
      const payload = randomBatch(r, { blockSize: BS, pool });
      expect(outcome(core, payload), `batch ${i}`).toEqual(outcome(host, payload));
    }
    expect(core.stats.core).toBeGreaterThan(100);
  });

  it("should refuse exactly the corrupt frames the host refuses (4,000 mutations), and nothing else", async () => {
    const { index, core, host } = await pairOfPreparers({ blockSize: BS });
    const codec = EngineBatchCodec.for(index);
    const policy = { blockSize: BS, kvGroup: -1, indexDevice: true, dropForeignExtraKeys: true, seedLo: 0, seedHi: 0 };
    const r = seededRandom(4_242);
    const pool = hashPool(r, 16);
    let refusedByCore = 0;
    for (let i = 0; i < 4_000; i++) {
      const payload = corrupt(r, randomBatch(r, { blockSize: BS, pool }));
      const want = outcome(host, payload);
      expect(outcome(core, payload), `mutation ${i}: ${Buffer.from(payload).toString("hex")}`).toEqual(want);
      // The core's own verdict: "corrupt" only where the host throws too (it is never stricter).
      if (codec.decode(payload, policy) === "corrupt") {
        refusedByCore++;
        expect(want, `mutation ${i}`).toEqual({ error: "KVGATE_ERR_CORRUPT_EVENT" });
      }
    }
    expect(refusedByCore).toBeGreaterThan(1_000);
  });

  it("should leave two indexes identical when streams feed them through either decoder", async () => {
    const opts = { maxSlots: 8, capacity: 1 << 12, salt: 0x5eedn };
    const a = await createKvIndex(opts), b = await createKvIndex(opts);
    const sa = new KvEventStream(a, { worker: "w", blockSize: BS });
    const sb = new KvEventStream(b, { worker: "w", blockSize: BS, coreDecode: false });
    const r = seededRandom(31_337);
    const pool = hashPool(r, 32);
    const capture = loadCapture();
    const prompts: number[][] = [capture.tokens];
    for (let seq = 0; seq < 1_500; seq++) {
      let payload = randomBatch(r, { blockSize: BS, pool });
      if (seq % 50 === 0) payload = vllmBatch([captureStored(capture, { blocks: 1 + r.int(25) })], r.int(2) === 0 ? "array" : "map");
      if (r.int(10) === 0) payload = corrupt(r, payload);
      sa.onBatch(seq, payload);
      sb.onBatch(seq, payload);
    }
    expect(sa.counters).toEqual(sb.counters);
    expect(sa.decoders.core).toBeGreaterThan(400);
    expect(a.counters()).toEqual(b.counters());
    expect(a.stats().entries).toBe(b.stats().entries);
    expect(a.stats().nodes).toBe(b.stats().nodes);
    for (let rank = 0; rank < 4; rank++) expect(hooks.treeSize(a, "w", rank)).toBe(hooks.treeSize(b, "w", rank));
    for (const t of prompts) expect(hooks.findMatches(a, t, { blockSize: BS }).matches).toEqual(hooks.findMatches(b, t, { blockSize: BS }).matches);
  });
});

describe("in-core decoder edge cases", () => {
  const T = loadCapture().tokens.slice(0, 16);
  const TS = 1_700_000_000.5;
  const st = (fields: Record<number, unknown>): unknown[] => {
    const e: unknown[] = ["BlockStored", [5n], null, T, BS, null, "GPU", null];
    for (const [i, v] of Object.entries(fields)) e[Number(i)] = v;
    return e;
  };
  let deep: unknown = 0;
  for (let i = 0; i < 63; i++) deep = [deep];
  const raw = (hex: string): Uint8Array => new Uint8Array(Buffer.from(hex.replace(/ /g, ""), "hex"));
  /** A batch of one map event whose keys may repeat (an object cannot hold them). */
  const mapEvent = (entries: [string, unknown][]): Uint8Array => {
    const event = Buffer.concat([Buffer.from([0x80 | entries.length]), ...entries.flatMap(([k, v]) => [pack(k), pack(v)])]);
    return new Uint8Array(Buffer.concat([Buffer.from([0x93]), pack(TS), Buffer.from([0x91]), event, pack(0)]));
  };
  const T2 = [...T, ...T.map((t) => t + 1)];
  const CASES: [string, Uint8Array][] = [
    ["token ids as uint64 and int64 of small values", pack([TS, [st({ 3: [...T.slice(0, 14).map(BigInt), -0n, 7n] })], 0])],
    ["a token id beyond u32 as uint64", pack([TS, [st({ 3: [2n ** 32n, ...T.slice(1)] })], 0])],
    ["a token id beyond 2^53", pack([TS, [st({ 3: [2n ** 60n, ...T.slice(1)] })], 0])],
    ["a negative token id", pack([TS, [st({ 3: [-1, ...T.slice(1)] })], 0])],
    ["a negative token id as int64", pack([TS, [st({ 3: [-(2n ** 40n), ...T.slice(1)] })], 0])],
    ["NaN ts", pack([NaN, [st({})], 0])],
    ["integer ts", pack([1_700_000_000, [st({})], 0])],
    ["ts beyond 2^53", pack([2n ** 62n, [st({})], 0])],
    ["rank 4095", pack([TS, [st({})], 4095])],
    ["rank 4096", pack([TS, [st({})], 4096])],
    ["rank as int8", raw("93 cb41d954fc40000000 90 d0 05")],
    ["negative rank", pack([TS, [], -2])],
    ["nil rank in a map after a rank", pack({ ts: TS, events: [st({})], dp_rank: 2, attn_dp_rank: null })],
    ["two events keys", raw("83 a2 7473 cb41d954fc40000000 a6 6576656e7473 91 93 ac 426c6f636b52656d6f766564 91 05 a3 475055 a6 6576656e7473 92 91 b0 416c6c426c6f636b73436c6561726564 91 b0 416c6c426c6f636b73436c6561726564")],
    ["unknown field nested 63 deep", pack([TS, [st({ 12: deep })], 0])],
    ["unknown field nested 64 deep", pack([TS, [st({ 12: [deep] })], 0])],
    ["unknown field nested 65 deep", pack([TS, [st({ 12: [[deep]] })], 0])],
    ["a 7-byte bin hash", pack([TS, [st({ 1: [new Uint8Array(7)] })], 0])],
    ["an 8-byte bin hash", pack([TS, [st({ 1: [new Uint8Array(8).fill(9)] })], 0])],
    ["a float hash", pack([TS, [st({ 1: [1.5] })], 0])],
    ["int8/16/32 negative hashes", pack([TS, [st({ 1: [-3, -300, -70_000], 3: [...T, ...T, ...T] })], 0])],
    ["tag as str8", raw("93 cb41d954fc40000000 91 92 d90c 426c6f636b52656d6f766564 91 05 00")],
    ["medium as str8 GPU", raw("93 cb41d954fc40000000 91 93 ac 426c6f636b52656d6f766564 91 05 d903 475055 00")],
    ["medium non-ASCII", pack([TS, [st({ 6: "GPÜ" })], 0])],
    ["medium lower case", pack([TS, [st({ 6: "gpu" })], 0])],
    ["spec kind non-ASCII", pack([TS, [st({ 8: null, 9: 0, 10: "fülle" })], 0])],
    ["spec kind invalid UTF-8", raw("93 cb41d954fc40000000 91 9b ab 426c6f636b53746f726564 91 05 c0 90 c0 c0 a3475055 c0 c0 00 a2c3ff 00")],
    ["extra_keys string invalid UTF-8", raw("93 cb41d954fc40000000 91 99 ab 426c6f636b53746f726564 91 05 c0 90 c0 c0 a3475055 c0 91 91 a2c3ff 00")],
    ["extra_keys of a Removed map event", pack([TS, [{ type: "BlockRemoved", block_hashes: [5n], extra_keys: [["x"]] }], 0])],
    ["duplicate block_hashes keys", raw("93 cb41d954fc40000000 91 83 a4 74797065 ac 426c6f636b52656d6f766564 ac 626c6f636b5f686173686573 91 05 ac 626c6f636b5f686173686573 92 06 07 00")],
    ["duplicate medium keys, nil last", raw("93 cb41d954fc40000000 91 84 a4 74797065 ac 426c6f636b52656d6f766564 ac 626c6f636b5f686173686573 91 05 a6 6d656469756d a3 435055 00")],
    // Token ids go straight into the record when the hashes came first: a later block_hashes key must neither
    // overwrite them (its scratch) nor leave the old hashes in the record.
    ["block_hashes again after token_ids, same count", mapEvent([["type", "BlockStored"], ["block_hashes", [5n, 6n]], ["token_ids", T2], ["block_hashes", [7n, 2n ** 63n + 9n]], ["block_size", BS]])],
    ["block_hashes again after token_ids, one fewer", mapEvent([["type", "BlockStored"], ["block_hashes", [5n, 6n]], ["token_ids", T2], ["block_hashes", [7n]]])],
    ["block_hashes again after token_ids, one more", mapEvent([["type", "BlockStored"], ["block_hashes", [5n]], ["token_ids", T], ["block_hashes", [7n, 8n]], ["block_size", BS]])],
    ["token_ids twice after block_hashes", mapEvent([["type", "BlockStored"], ["block_hashes", [5n, 6n]], ["token_ids", T2], ["token_ids", [...T2].reverse()]])],
    ["token_ids before block_hashes", mapEvent([["type", "BlockStored"], ["token_ids", T2], ["block_hashes", [5n, 6n]], ["parent_block_hash", 3n]])],
    ["a dropped event's token ids then a stored one", pack([TS, [st({ 4: BS * 2 }), st({ 1: [9n], 3: T.map((t) => t + 2) })], 0])],
    ["extra_keys foreign, then all nil", mapEvent([["type", "BlockStored"], ["block_hashes", [5n]], ["token_ids", T], ["extra_keys", [["img", 0]]], ["extra_keys", [null]]])],
    ["extra_keys all nil, then foreign", mapEvent([["type", "BlockStored"], ["block_hashes", [5n]], ["token_ids", T], ["extra_keys", [null]], ["extra_keys", [["img", 0]]]])],
    ["extra_keys foreign, then nil", mapEvent([["type", "BlockStored"], ["block_hashes", [5n]], ["token_ids", T], ["extra_keys", [["img", 0]]], ["extra_keys", null]])],
    ["extra_keys of 19 nils and one foreign", pack([TS, [st({ 1: Array.from({ length: 20 }, (_, i) => BigInt(i + 1)), 3: Array.from({ length: 20 }, () => T).flat(), 8: [...Array(19).fill(null), ["img", 0]] })], 0])],
    ["extra_keys of 20 nils", pack([TS, [st({ 1: Array.from({ length: 20 }, (_, i) => BigInt(i + 1)), 3: Array.from({ length: 20 }, () => T).flat(), 8: Array(20).fill(null) })], 0])],
    ["lora_id without lora_name", pack([TS, [st({ 5: 7 })], 0])],
    ["group_idx beyond 2^53", pack([TS, [st({ 8: null, 9: 2n ** 60n })], 0])],
    ["events count beyond the frame", raw("93 cb41d954fc40000000 dd ffffffff 00")],
    ["empty event array", pack([TS, [[]], 0])],
    ["trailing byte", raw("93 cb41d954fc40000000 90 00 00")],
    ["reserved type code 0xc1", raw("93 cb41d954fc40000000 91 93 ac 426c6f636b52656d6f766564 91 c1 00 00")],
    ["ext types in unknown fields", raw("93 cb41d954fc40000000 91 92 a6 467574757265 95 d4 01 02 d5 01 0203 c7 02 01 0405 d8 01 00112233445566778899aabbccddeeff c9 00000001 01 00 00")],
  ];
  it("should match the host decoder on token ids of every width, whole and cut at every byte", async () => {
    // Ids of every msgpack width, ending the payload (a map batch whose last value is the token array), so the
    // core's unchecked runs and its checked tail both meet the end of the bytes.
    const widths = [5, 200, 40_000, 70_000, 127, 255, 65_535, 2 ** 32 - 1, 128, 256, 65_536, 0, 1, 300, 90_000, 17];
    const payloads = [
      pack({ ts: TS, events: [{ type: "BlockStored", block_hashes: [5n], parent_block_hash: null, token_ids: widths }] }),
      pack({ ts: TS, events: [{ type: "BlockStored", block_hashes: [5n, 6n], parent_block_hash: null, token_ids: [...T, ...widths] }] }),
    ];
    const { core, host } = await pairOfPreparers({ blockSize: BS });
    for (const full of payloads) {
      const before = core.stats.core;
      expect(outcome(core, full)).toEqual(outcome(host, full));
      expect(core.stats.core, "decoded in the core").toBe(before + 1);
      for (let cut = full.length; cut > full.length - 80; cut--) {
        const part = full.subarray(0, cut);
        expect(outcome(core, part), `cut at ${cut}`).toEqual(outcome(host, part));
      }
    }
  });
  for (const [name, payload] of CASES) {
    it(`should match the host decoder on ${name}`, async () => {
      for (const policy of [{ blockSize: BS }, { blockSize: BS, kvGroup: 1 }]) {
        const { core, host } = await pairOfPreparers(policy);
        expect(outcome(core, payload)).toEqual(outcome(host, payload));
      }
    });
  }
});

describe("in-core decoder state", () => {
  const capture = loadCapture();

  it("should apply a batch decoded before another stream decoded into the same core (decoding it again)", async () => {
    const index = await createKvIndex({ maxSlots: 4, capacity: 4096 });
    const policy = resolvePolicy({ blockSize: BS });
    const a = new BatchPreparer(index, "a", 0, policy), b = new BatchPreparer(index, "b", 0, policy);
    a.prepare(vllmBatch([captureStored(capture, { blocks: 10 })]));
    b.prepare(vllmBatch([captureStored(capture, { blocks: 4 })], "map"));
    a.apply();
    b.apply();
    expect(hooks.treeSize(index, "a")).toBe(10);
    expect(hooks.treeSize(index, "b")).toBe(4);
    expect(a.stats).toEqual({ core: 1, host: 0 });
  });

  it("should keep decoding in the core after a trap rebuilt the instance", async () => {
    const index = await createKvIndex({ maxSlots: 4, capacity: 4096 });
    const s = new KvEventStream(index, { worker: "t", blockSize: BS });
    s.onBatch(0, vllmBatch([captureStored(capture, { blocks: 5 })]));
    expect(() => hooks.induceTrap(index)).toThrow();
    expect(hooks.treeSize(index, "t")).toBe(0);
    s.onBatch(1, vllmBatch([captureStored(capture, { blocks: 7 })]));
    expect(s.decoders).toEqual({ core: 2, host: 0 });
    expect(s.counters.applyErrors).toBe(0);
    expect(hooks.treeSize(index, "t")).toBe(7);
  });

  it("should keep token ids read into the record apart from later scratch when the output region is nearly full", async () => {
    // Output region 128 KiB (eventBytes 1 KiB: input 64 KiB). 213 stored fillers of 8 blocks (608-byte records) and j
    // one-hash removals (8 bytes each) walk the last event's record across the region's end in 8-byte steps; its
    // token ids go into its record, then a repeated block_hashes key takes scratch from the top, which must stop
    // short of those ids (the core declines, the host decodes) rather than overwrite them.
    const index = await createKvIndex({ maxSlots: 2, capacity: 1 << 14, eventBlocks: 8, eventBytes: 1 << 10 });
    const { core, host } = await pairOfPreparers({ blockSize: BS }, index);
    const ids = (k: number): number[] => Array.from({ length: 128 }, (_, i) => (i * 7 + k) % 128);
    const hashes = (k: number): bigint[] => Array.from({ length: 8 }, (_, i) => BigInt(k * 16 + i + 1));
    const filler = Array.from({ length: 213 }, (_, k) => pack(["BlockStored", hashes(k), null, ids(k), BS, null, "GPU"]));
    const last = Buffer.concat([Buffer.from([0x83]), pack("block_hashes"), pack(hashes(900)), pack("token_ids"), pack(ids(5)),
      pack("block_hashes"), pack(hashes(901))]);
    const tagged = Buffer.concat([Buffer.from([0x84]), pack("type"), pack("BlockStored"), last.subarray(1)]);
    let inCore = 0;
    for (let j = 0; j < 130; j++) {
      const removals = Array.from({ length: j }, (_, i) => pack(["BlockRemoved", [BigInt(50_000 + i)], "GPU"]));
      const events = [...filler, ...removals, tagged];
      const payload = new Uint8Array(Buffer.concat([Buffer.from([0x93]), pack(1_700_000_000.5), Buffer.from([0xdc, events.length >> 8, events.length & 255]),
        ...events, pack(0)]));
      const before = core.stats.core;
      expect(outcome(core, payload), `${j} removals`).toEqual(outcome(host, payload));
      inCore += core.stats.core - before;
    }
    expect(inCore, "most of them decoded in the core").toBeGreaterThan(60);
    expect(inCore, "the last ones did not fit").toBeLessThan(130);
  });

  it("should hand batches larger than the core's input region to the host decoder", async () => {
    const index = await createKvIndex({ maxSlots: 2, capacity: 1 << 14 });
    const s = new KvEventStream(index, { worker: "big", blockSize: BS });
    const events = Array.from({ length: 1_000 }, (_, i) => captureStored(capture, { from: i % 25, blocks: 1 }));
    const payload = vllmBatch(events);
    expect(payload.length).toBeGreaterThan(64 * 1024);
    const small = await createKvIndex({ maxSlots: 2, capacity: 1 << 14, eventBytes: 1 << 10 });
    const t = new KvEventStream(small, { worker: "big", blockSize: BS });
    s.onBatch(0, payload);
    t.onBatch(0, payload);
    expect(s.decoders).toEqual({ core: 1, host: 0 });
    expect(t.decoders).toEqual({ core: 0, host: 1 });
    expect(t.counters).toEqual(s.counters);
  });
});
