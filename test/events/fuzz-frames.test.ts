import { afterEach, describe, expect, it } from "vitest";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import type { KvIndex } from "../../src/core/kv-index.ts";
import { seededRandom, type Random } from "../../src/core/seeded-random.ts";
import { KvEventStream, type ReplaySource } from "../../src/events/kv-event-stream.ts";
import { encodeSeq } from "../../src/events/zmq-frames.ts";
import { ZmqKvEventSubscriber } from "../../src/zmq/kv-event-subscriber.ts";
import { engineZmtpSockets } from "../../src/zmq/zmtp-sockets.ts";
import { ALL_BLOCKS_CLEARED, blockRemoved, captureStored, derivedVectors, hex, liveFrames, loadCapture, pack, until, vllmBatch } from "./helpers.ts";
import { mutateBytes } from "./random-batches.ts";
import { TestEngine } from "./zmq-engine.ts";
import { nodeTcpDialer } from "../../src/adapter/node/tcp-dialer.ts";
import { nativeSockets } from "../../src/adapter/node/zmq-native.ts";
import * as hooks from "../support/kv-index-hooks.ts";

const capture = loadCapture();
const T = capture.tokens;
const T16 = T.slice(0, 16);
const TS = 1_700_000_000.5;

const VALID: Uint8Array[] = [
  vllmBatch([captureStored(capture)], "array"),
  vllmBatch([captureStored(capture)], "map"),
  vllmBatch([blockRemoved(capture.hashes.slice(5)), ALL_BLOCKS_CLEARED], "map"),
  vllmBatch([captureStored(capture, { blocks: 3, lora: "Alice" }), blockRemoved([capture.hashes[2]!])], "array", 1),
  hex(derivedVectors().framesHex.legacy_array),
  hex(derivedVectors().framesHex.map),
  pack({ ts: TS, events: [{ type: "BlockStored", block_hashes: [1n, 2n], parent_block_hash: null, token_ids: T.slice(0, 31).map((t, i) => [t, T[i + 1]!]).slice(0, 32), block_size: 16 }] }),
];

const stored = (fields: Record<number, unknown>): unknown[] => {
  const e: unknown[] = ["BlockStored", [1n], null, T16, 16, null, "GPU", null];
  for (const [i, v] of Object.entries(fields)) e[Number(i)] = v;
  return e;
};
let deep: unknown = 0;
for (let i = 0; i < 90; i++) deep = [deep];

/** Batches that are well-formed msgpack but not KV-event batches: each must be refused whole. */
const CONFUSED: Uint8Array[] = [
  pack("batch"), pack(5), pack(null), pack(true), pack(1.5), pack([]), pack([TS]), pack([TS, 5]), pack(["ts", []]), pack([null, []]),
  pack({ events: [] }), pack({ ts: TS }), pack({ ts: TS, events: {} }), pack([TS, [5]]), pack([TS, [null]]), pack([TS, ["BlockStored"]]),
  pack([TS, [[]]]), pack([TS, [[5, [1n]]]]), pack([TS, [["BlockStored"]]]), pack([TS, [["BlockRemoved"]]]),
  pack([TS, [{ type: 5 }]]), pack([TS, [{ type: "BlockStored", block_hashes: [1n] }]]), pack([TS, [{ type: "BlockRemoved", block_hashes: "x" }]]),
  pack([TS, [stored({ 1: "x" })]]), pack([TS, [stored({ 1: [1.5] })]]), pack([TS, [stored({ 1: ["abc"] })]]), pack([TS, [stored({ 1: [new Uint8Array(4)] })]]),
  pack([TS, [stored({ 1: [null] })]]), pack([TS, [stored({ 1: [{}] })]]), pack([TS, [stored({ 2: "parent" })]]), pack([TS, [stored({ 2: [1] })]]),
  pack([TS, [stored({ 3: "tokens" })]]), pack([TS, [stored({ 3: { a: 1 } })]]), pack([TS, [stored({ 3: [-1, ...T16.slice(1)] })]]),
  pack([TS, [stored({ 3: [2 ** 32, ...T16.slice(1)] })]]), pack([TS, [stored({ 3: [1.5, ...T16.slice(1)] })]]), pack([TS, [stored({ 3: [[1, 2, 3]] })]]),
  pack([TS, [stored({ 3: [[1]] })]]), pack([TS, [stored({ 3: [[1, 2], 3] })]]), pack([TS, [stored({ 4: "16" })]]), pack([TS, [stored({ 4: -16 })]]),
  pack([TS, [stored({ 5: "id" })]]), pack([TS, [stored({ 6: 5 })]]), pack([TS, [stored({ 7: 7 })]]), pack([TS, [stored({ 9: "g" })]]),
  pack([TS, [stored({ 10: 3 })]]), pack([TS, [stored({ 12: deep })]]), pack([TS, [{ type: "Future", payload: deep }]]),
  pack([TS, [], -1]), pack([TS, [], "0"]), pack([TS, [], 5000]), pack([TS, [], 1.5]), pack([TS, [], 2n ** 60n]), pack({ ts: TS, events: [], data_parallel_rank: -3 }),
  pack([TS, [stored({ 6: "GP\u00dcU" })], 0]).map((b, i, a) => (i === a.length - 4 ? 0xff : b)), // invalid UTF-8 in medium
  new Uint8Array([0x93, 0xcb, 0x41, 0xd9, 0x54, 0xfc, 0x40, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff, 0]), // events count beyond the frame
  new Uint8Array([0x92, 0xc1, 0x90]), new Uint8Array([0x92, 0x01, 0x91, 0xc1]),
];

const isContainer = (b: number): boolean => (b >= 0x80 && b <= 0x9f) || b === 0xdc || b === 0xdd || b === 0xde || b === 0xdf;
const bytes = (r: Random, n: number): Uint8Array => Uint8Array.from({ length: n }, () => r.int(256));

interface Fuzzed {
  frames: Uint8Array[];
  /** Sent with the last applied seq: a mutation that happens to decode is then a duplicate, never applied. */
  staleSeq: boolean;
}

/** One corrupt message; `next` is the seq the stream would apply next, `last` the last it applied. */
function fuzzed(r: Random, next: number, last: number): Fuzzed {
  const valid = VALID[r.int(VALID.length)]!;
  const seq = encodeSeq(next);
  switch (r.int(9)) {
    case 0: {
      const k = [1, 2, 4, 5][r.int(4)]!;
      return { frames: Array.from({ length: k }, (_, i) => (i === 1 ? seq : i === 2 ? valid : bytes(r, r.int(12)))), staleSeq: false };
    }
    case 1: {
      let len = r.int(17);
      if (len === 8) len = 9;
      return { frames: [bytes(r, 4), bytes(r, len), valid], staleSeq: false };
    }
    case 2: return { frames: liveFrames(next, valid.subarray(0, r.int(valid.length))), staleSeq: false };
    case 3: {
      const tail = bytes(r, 1 + r.int(16));
      const p = new Uint8Array(valid.length + tail.length);
      p.set(valid);
      p.set(tail, valid.length);
      return { frames: liveFrames(next, p), staleSeq: false };
    }
    case 4: {
      const p = bytes(r, r.int(64) + 1);
      while (isContainer(p[0]!)) p[0] = r.int(256);
      return { frames: liveFrames(next, p), staleSeq: false };
    }
    case 5: return { frames: liveFrames(next, CONFUSED[r.int(CONFUSED.length)]!), staleSeq: false };
    case 6: return { frames: [new Uint8Array(0), new Uint8Array(8).fill(0xff), valid], staleSeq: false }; // END marker on the live socket
    case 7: return { frames: [new Uint8Array(0), new Uint8Array([0xff, 0xf0, 0, 0, 0, 0, 0, 1]), valid], staleSeq: false }; // seq ≥ 2^53
    default:
      return { frames: liveFrames(last, mutateBytes(r, valid)), staleSeq: true };
  }
}

/** A replay source that must never be asked: no corrupt frame may look like a gap. */
const noReplay: ReplaySource = {
  // eslint-disable-next-line require-yield
  async *replay(from: number) {
    throw new Error(`replay from ${from} requested by a corrupt frame`);
  },
};

function snapshot(index: KvIndex): unknown {
  // The prompt memo's counters move with the matching below (they count hashing, not index state).
  const { memoReused: _reused, memoHashed: _hashed, ...counters } = index.counters();
  return {
    counters,
    stats: index.stats(),
    matches: hooks.findMatches(index, T, { blockSize: 16 }).matches,
    lora: hooks.findMatches(index, T, { blockSize: 16, lora: "Alice" }).matches,
  };
}

describe("fuzzed corrupt frames", () => {
  it("should refuse 6,000 corrupt messages without throwing, touching the index or moving the stream", async () => {
    const index = await createKvIndex({ maxSlots: 8, capacity: 4096 });
    const s = new KvEventStream(index, { worker: "fz", blockSize: 16, replay: noReplay });
    const other = new KvEventStream(index, { worker: "other", blockSize: 16 });
    s.onMessage(liveFrames(0, vllmBatch([captureStored(capture)])));
    other.onMessage(liveFrames(0, vllmBatch([captureStored(capture, { blocks: 10, lora: "Alice" })])));
    for (const c of CONFUSED) expect(() => s.onBatch(1, c)).not.toThrow();
    expect(s.counters.corruptFrames).toBe(CONFUSED.length);
    const before = snapshot(index);
    const counters = { ...s.counters };
    const r = seededRandom(20_260_601);
    let stale = 0;
    for (let i = 0; i < 6_000; i++) {
      const f = fuzzed(r, s.lastSeq + 1, s.lastSeq);
      if (f.staleSeq) stale++;
      s.onMessage(f.frames);
    }
    expect(snapshot(index)).toEqual(before);
    expect(s.lastSeq).toBe(0);
    expect(s.cold).toBe(false);
    expect(s.phase).toBe("live");
    const d = s.counters;
    expect(d.messages - counters.messages).toBe(6_000);
    expect(d.corruptFrames + d.staleBatches - counters.corruptFrames - counters.staleBatches).toBe(6_000);
    expect(d.staleBatches - counters.staleBatches).toBeLessThanOrEqual(stale);
    expect(d.corruptFrames - counters.corruptFrames).toBeGreaterThanOrEqual(6_000 - stale);
    expect({ gaps: d.gaps, restarts: d.restarts, batches: d.batches, replayRequests: d.replayRequests, applyErrors: d.applyErrors })
      .toEqual({ gaps: 0, restarts: 0, batches: 1, replayRequests: 0, applyErrors: 0 });
    // Still alive and in step: the next valid batch applies.
    s.onMessage(liveFrames(1, vllmBatch([blockRemoved(capture.hashes.slice(15))])));
    expect(hooks.findMatches(index, T, { blockSize: 16 }).matches.find((m) => m.worker === "fz")!.blocks).toBe(15);
  });

  describe("over a real ZeroMQ socket", () => {
    let engine: TestEngine | undefined;
    let sub: ZmqKvEventSubscriber | undefined;
    afterEach(async () => {
      await sub?.close();
      await engine?.close();
    });

    it.each(["zmtp", "zeromq"] as const)("should survive 2,000 corrupt messages on the wire and apply the next valid batch (%s client)", async (client) => {
      const index = await createKvIndex({ maxSlots: 4, capacity: 4096 });
      engine = await TestEngine.start();
      sub = new ZmqKvEventSubscriber(index, { sockets: client === "zmtp" ? engineZmtpSockets(nodeTcpDialer) : nativeSockets });
      const [s] = await sub.attach({ worker: "wire", endpoint: engine.endpoint, blockSize: 16 });
      await engine.subscribed();
      await engine.publish(0, vllmBatch([captureStored(capture)], "map"));
      await until(() => s!.lastSeq === 0);
      const before = snapshot(index);
      const r = seededRandom(99);
      for (let i = 0; i < 2_000; i++) await engine.sendRaw(fuzzed(r, 1, 0).frames);
      await until(() => s!.counters.messages === 2_001, "all fuzzed messages");
      expect(snapshot(index)).toEqual(before);
      expect(s!.counters.corruptFrames + s!.counters.staleBatches).toBe(2_000);
      expect(sub.transport.socketErrors).toBe(0);
      await engine.publish(1, vllmBatch([blockRemoved(capture.hashes.slice(15))]));
      await until(() => s!.lastSeq === 1);
      expect(hooks.findMatches(index, T, { blockSize: 16 }).matches[0]!.blocks).toBe(15);
    });
  });
});
