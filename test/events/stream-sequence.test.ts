import { beforeEach, describe, expect, it } from "vitest";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import type { KvIndex } from "../../src/core/kv-index.ts";
import { KvEventStream, type KvEventStreamOptions, type ReplaySource } from "../../src/events/kv-event-stream.ts";
import type { SeqFrame } from "../../src/events/zmq-frames.ts";
import { ALL_BLOCKS_CLEARED, captureStored, loadCapture, vllmBatch } from "./helpers.ts";
import * as hooks from "../support/kv-index-hooks.ts";

const capture = loadCapture();
/** Batch k stores block k of the captured prompt, chained to block k − 1: depth after seq s (complete) is s + 1. */
const blockBatch = (k: number): Uint8Array => vllmBatch([captureStored(capture, { from: k, blocks: 1 })]);

/** The engine's replay buffer in memory; `gate` holds the reply until the test opens it. */
class MemoryReplay implements ReplaySource {
  readonly buffer = new Map<number, Uint8Array>();
  readonly requests: number[] = [];
  mode: "normal" | "refuse" | "throw" = "normal";
  oldest = 0;
  gate: Promise<void> | undefined;

  async *replay(from: number): AsyncGenerator<SeqFrame> {
    this.requests.push(from);
    // What the engine holds when the request arrives.
    const snapshot = [...this.buffer].filter(([s]) => s >= Math.max(from, this.oldest)).sort((a, b) => a[0] - b[0]);
    if (this.gate) await this.gate;
    if (this.mode === "throw") throw new Error("connection refused");
    if (this.mode === "refuse") return;
    for (const [seq, payload] of snapshot) yield { seq, payload };
  }
}

let index: KvIndex;
let replay: MemoryReplay;

beforeEach(async () => {
  index = await createKvIndex({ maxSlots: 4, capacity: 4096 });
  replay = new MemoryReplay();
});

function open(opts: Partial<KvEventStreamOptions> = {}): KvEventStream {
  return new KvEventStream(index, { worker: "w", blockSize: 16, replay, ...opts });
}

/** The engine publishes seq (always buffered for replay); the stream receives it unless lost. */
function publish(s: KvEventStream, seq: number, opts: { lose?: boolean; payload?: Uint8Array } = {}): void {
  const payload = opts.payload ?? blockBatch(seq);
  replay.buffer.set(seq, payload);
  if (!opts.lose) s.onBatch(seq, payload);
}

const depth = (): number => hooks.findMatches(index, capture.tokens, { blockSize: 16 }).matches[0]?.blocks ?? 0;

describe("sequence numbers in order", () => {
  it("should apply consecutive batches and drop a duplicate as stale", () => {
    const s = open();
    for (let q = 0; q < 25; q++) publish(s, q);
    expect(depth()).toBe(25);
    s.onBatch(24, blockBatch(24));
    expect(s.counters).toMatchObject({ batches: 25, staleBatches: 1, gaps: 0, replayRequests: 0 });
    expect(s.phase).toBe("live");
  });
});

describe("gap → replay → caught up", () => {
  it("should ask for the batches after the last applied one and end where the engine is", async () => {
    const s = open();
    for (let q = 0; q < 5; q++) publish(s, q);
    for (let q = 5; q < 10; q++) publish(s, q, { lose: true });
    publish(s, 10);
    expect(s.phase).toBe("replaying");
    await s.settled();
    expect(replay.requests).toEqual([5]);
    expect(s.lastSeq).toBe(10);
    expect(depth()).toBe(11);
    expect(s.cold).toBe(false);
    expect(s.counters).toMatchObject({ gaps: 1, replayRequests: 1, replayedBatches: 6, staleBatches: 1, replayFailures: 0, coldMarks: 0 });
    publish(s, 11);
    expect(depth()).toBe(12);
  });

  it("should hold live batches that arrive during the replay and apply them after it, in order", async () => {
    const s = open();
    for (let q = 0; q < 3; q++) publish(s, q);
    let open_!: () => void;
    replay.gate = new Promise((r) => { open_ = r; });
    publish(s, 3, { lose: true });
    publish(s, 4);
    publish(s, 5);
    publish(s, 6);
    expect(depth()).toBe(3);
    open_();
    await s.settled();
    expect(s.lastSeq).toBe(6);
    expect(depth()).toBe(7);
    expect(s.counters).toMatchObject({ replayedBatches: 2, staleBatches: 1, batches: 7 });
  });

  it("should chain another replay round when held batches still have a hole", async () => {
    const s = open();
    for (let q = 0; q < 3; q++) publish(s, q);
    let open_!: () => void;
    replay.gate = new Promise((r) => { open_ = r; });
    publish(s, 3, { lose: true });
    publish(s, 4); // the replay was asked here: the engine holds 3 and 4
    publish(s, 5, { lose: true });
    publish(s, 6);
    replay.gate = undefined;
    open_();
    await s.settled();
    expect(replay.requests).toEqual([3, 5]);
    expect(s.lastSeq).toBe(6);
    expect(depth()).toBe(7);
    expect(s.cold).toBe(false);
  });

  it("should drop live batches beyond maxHeld during a replay and fetch them with the next one", async () => {
    const s = open({ maxHeld: 2 });
    for (let q = 0; q < 5; q++) publish(s, q);
    let open_!: () => void;
    replay.gate = new Promise((r) => { open_ = r; });
    for (let q = 5; q < 10; q++) publish(s, q, { lose: true });
    publish(s, 10);
    replay.gate = undefined;
    for (let q = 11; q < 16; q++) publish(s, q);
    open_();
    await s.settled();
    expect(s.counters.overflowed).toBe(4);
    expect(s.lastSeq).toBe(11);
    publish(s, 16);
    await s.settled();
    expect(s.lastSeq).toBe(16);
    expect(depth()).toBe(17);
    expect(s.cold).toBe(false);
    expect(replay.requests).toEqual([5, 12]);
  });
});

describe("replay and live socket racing", () => {
  it("should drop live batches a replay already applied as stale, not take them for a restart", async () => {
    const s = open();
    for (let q = 0; q < 3; q++) publish(s, q);
    publish(s, 3, { lose: true });
    // The engine has published up to 7 when the replay request arrives; 5…7 are still in flight on the SUB socket.
    for (let q = 5; q < 8; q++) replay.buffer.set(q, blockBatch(q));
    publish(s, 4);
    await s.settled();
    expect(s.lastSeq).toBe(7);
    for (let q = 5; q < 8; q++) s.onBatch(q, blockBatch(q));
    publish(s, 8);
    expect(s.counters).toMatchObject({ restarts: 0, staleBatches: 4, gaps: 1 });
    expect(s.lastSeq).toBe(8);
    expect(depth()).toBe(9);
  });

  it("should notice an engine restart among the live batches held during a replay", async () => {
    const s = open();
    for (let q = 0; q < 5; q++) publish(s, q);
    let open_!: () => void;
    replay.gate = new Promise((r) => { open_ = r; });
    publish(s, 5, { lose: true });
    publish(s, 6);
    // The engine restarts while the replay is in flight: the new process starts again at 0.
    s.onBatch(0, vllmBatch([captureStored(capture, { blocks: 3 })]));
    s.onBatch(1, vllmBatch([captureStored(capture, { from: 3, blocks: 1 })]));
    replay.gate = undefined;
    open_();
    await s.settled();
    expect(s.counters.restarts).toBe(1);
    expect(s.lastSeq).toBe(1);
    expect(hooks.treeSize(index, "w")).toBe(4);
    expect(depth()).toBe(4);
  });
});

describe("replay cannot fill the gap → worker cold", () => {
  it("should clear the worker and mark it cold when the replay is refused (nothing from that seq)", async () => {
    const s = open();
    for (let q = 0; q < 5; q++) publish(s, q);
    replay.mode = "refuse";
    publish(s, 9);
    await s.settled();
    expect(s.cold).toBe(true);
    expect(hooks.treeSize(index, "w")).toBe(0);
    expect(s.counters).toMatchObject({ replayFailures: 1, coldMarks: 1, gaps: 1 });
    // Block 9's parent (8) was never seen: the index keeps nothing false, and the stream carries on.
    expect(s.lastSeq).toBe(9);
    publish(s, 10);
    expect(s.lastSeq).toBe(10);
    expect(depth()).toBe(0);
  });

  it("should mark the worker cold when the replay socket is unavailable", async () => {
    const s = open();
    publish(s, 0);
    replay.mode = "throw";
    publish(s, 2);
    await s.settled();
    expect(s.cold).toBe(true);
    expect(s.counters).toMatchObject({ replayFailures: 1, coldMarks: 1 });
  });

  it("should mark the worker cold when the engine's buffer starts after the gap (too old), then apply what it has", async () => {
    const s = open();
    for (let q = 0; q < 5; q++) publish(s, q);
    for (let q = 5; q < 12; q++) publish(s, q, { lose: true });
    replay.oldest = 8;
    publish(s, 12);
    await s.settled();
    expect(s.cold).toBe(true);
    expect(s.counters).toMatchObject({ replayTooOld: 1, coldMarks: 1, replayedBatches: 5 });
    expect(s.lastSeq).toBe(12);
    expect(index.counters().parentMissing).toBeGreaterThan(0);
    expect(depth()).toBe(0);
  });

  it("should go cold at once on a gap when the engine has no replay socket", () => {
    const s = open({ replay: undefined });
    publish(s, 0);
    publish(s, 1);
    publish(s, 3);
    expect(s.cold).toBe(true);
    expect(s.phase).toBe("live");
    expect(s.counters).toMatchObject({ gaps: 1, replayRequests: 0, replayFailures: 1, coldMarks: 1 });
  });

  it("should count a cold worker as rebuilt after AllBlocksCleared, or after rebuildAfterBlocks stored blocks", () => {
    const s = open({ replay: undefined });
    publish(s, 0);
    publish(s, 2);
    expect(s.cold).toBe(true);
    publish(s, 3, { payload: vllmBatch([ALL_BLOCKS_CLEARED]) });
    expect(s.cold).toBe(false);
    expect(s.counters.rebuilt).toBe(1);
    const t = new KvEventStream(index, { worker: "t", blockSize: 16, rebuildAfterBlocks: 30 });
    t.onBatch(0, vllmBatch([captureStored(capture)]));
    t.onBatch(5, vllmBatch([captureStored(capture)]));
    expect(t.cold).toBe(true);
    t.onBatch(6, vllmBatch([captureStored(capture)]));
    expect(t.cold).toBe(false);
  });
});

describe("engine restart", () => {
  it("should clear the worker when the sequence returns to 0 and index the new engine's blocks", () => {
    const s = open();
    for (let q = 0; q < 10; q++) publish(s, q);
    expect(depth()).toBe(10);
    replay.buffer.clear();
    publish(s, 0, { payload: vllmBatch([captureStored(capture, { blocks: 2 })]) });
    expect(s.counters.restarts).toBe(1);
    expect(s.lastSeq).toBe(0);
    expect(hooks.treeSize(index, "w")).toBe(2);
    expect(depth()).toBe(2);
  });

  it("should replay the new engine's history from 0 when its first batches were missed", async () => {
    const s = open();
    for (let q = 0; q < 10; q++) publish(s, q);
    replay.buffer.clear();
    for (let q = 0; q < 3; q++) publish(s, q, { lose: true });
    publish(s, 3);
    await s.settled();
    expect(s.counters.restarts).toBe(1);
    expect(replay.requests).toEqual([0]);
    expect(s.lastSeq).toBe(3);
    expect(depth()).toBe(4);
    expect(hooks.treeSize(index, "w")).toBe(4);
    expect(s.cold).toBe(false);
  });
});

describe("joining a running engine", () => {
  it("should fetch the engine's buffered history from seq 0", async () => {
    const s = open();
    for (let q = 0; q < 6; q++) publish(s, q, { lose: true });
    publish(s, 6);
    await s.settled();
    expect(replay.requests).toEqual([0]);
    expect(depth()).toBe(7);
    expect(s.cold).toBe(false);
    expect(s.counters.gaps).toBe(0);
  });

  it("should mark the worker cold when the history cannot be had", () => {
    for (const opts of [{ replay: undefined }, { replayOnJoin: false }]) {
      const s = new KvEventStream(index, { worker: `late-${opts.replay === undefined}`, blockSize: 16, replay, ...opts });
      s.onBatch(6, blockBatch(0));
      expect(s.cold).toBe(true);
      expect(s.counters).toMatchObject({ coldMarks: 1, batches: 1, replayRequests: 0 });
    }
  });
});

describe("slot of the in-order path", () => {
  it("should follow the index when the worker's slot was released and taken by another worker", () => {
    const s = open();
    s.onBatch(0, blockBatch(0));
    s.onBatch(1, blockBatch(1));
    expect(hooks.treeSize(index, "w")).toBe(2);
    const first = index.slotFor("w");
    index.removeWorker("w");
    // Another worker now holds the slot the stream wrote to: the stream's next batch must open a slot of its own.
    expect(index.slotFor("other")).toBe(first);
    s.onBatch(2, vllmBatch([captureStored(capture, { from: 0, blocks: 3 })]));
    expect(hooks.treeSize(index, "other")).toBe(0);
    expect(hooks.treeSize(index, "w")).toBe(3);
    expect(index.slotFor("w")).not.toBe(first);
    expect(s.counters.applyErrors).toBe(0);
  });
});

describe("live messages as frames", () => {
  it("should apply Node Buffer frames and count malformed messages as corrupt", () => {
    const s = open({ replay: undefined, replayOnJoin: false });
    const seq = (n: number): Buffer => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; };
    s.onMessage([Buffer.alloc(0), seq(0), Buffer.from(blockBatch(0))]);
    s.onMessage([Buffer.alloc(0), seq(1)]);
    s.onMessage([Buffer.alloc(0), seq(1).subarray(1), Buffer.from(blockBatch(1))]);
    s.onMessage([Buffer.alloc(0), Buffer.alloc(8, 0xff), Buffer.from(blockBatch(1))]);
    s.onMessage([Buffer.alloc(0), seq(1), Buffer.from(blockBatch(1)), Buffer.alloc(0)]);
    expect(s.counters).toMatchObject({ messages: 5, corruptFrames: 4, batches: 1 });
    s.onMessage([new Uint8Array(0), new Uint8Array(seq(1)), blockBatch(1)]);
    expect(s.counters).toMatchObject({ messages: 6, corruptFrames: 4, batches: 2 });
    expect(hooks.treeSize(index, "w")).toBe(2);
  });
});
