import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import type { KvIndex } from "../../src/core/kv-index.ts";
import type { KvEventStream } from "../../src/events/kv-event-stream.ts";
import { KvEventHub } from "../../src/events/kv-event-hub.ts";
import { nodeTransport } from "../../src/adapter/node/zmq-transport.ts";
import type { ZmqKvEventSubscriber } from "../../src/zmq/kv-event-subscriber.ts";
import { captureStored, loadCapture, until, vllmBatch } from "../events/helpers.ts";
import { TestEngine } from "../events/zmq-engine.ts";
import * as hooks from "../support/kv-index-hooks.ts";

const capture = loadCapture();
const blockBatch = (k: number, form: "array" | "map" = "array"): Uint8Array => vllmBatch([captureStored(capture, { from: k, blocks: 1 })], form);

let index: KvIndex;
let sub: ZmqKvEventSubscriber;
const engines: TestEngine[] = [];
let n = 0;

beforeAll(async () => {
  index = await createKvIndex({ maxSlots: 32, capacity: 8192 });
  // The sockets Node's gateway uses: kvgate's ZMTP client (SUB and the replay DEALER) for tcp:// endpoints.
  sub = await nodeTransport(new KvEventHub(index), undefined, { replayTimeoutMs: 300 });
});

afterEach(async () => {
  for (const e of engines.splice(0)) await e.close();
});

afterAll(async () => {
  await sub.close();
});

async function setup(opts: { replay?: boolean; topic?: string; dpRanks?: number } = {}): Promise<{ engine: TestEngine; stream: KvEventStream; worker: string }> {
  const engine = await TestEngine.start({ replay: opts.replay ?? true, topic: opts.topic });
  engines.push(engine);
  const worker = `zmq-${n++}`;
  const [stream] = await sub.attach({ worker, endpoint: engine.endpoint, replayEndpoint: engine.replayEndpoint, blockSize: 16 });
  await engine.subscribed();
  return { engine, stream: stream!, worker };
}

function depth(worker: string): number {
  return hooks.findMatches(index, capture.tokens, { blockSize: 16 }).matches.find((m) => m.worker === worker)?.blocks ?? 0;
}

describe("gap → replay over a real DEALER/ROUTER → caught up", () => {
  for (const withTopic of [true, false]) {
    it(`should fetch the lost batches (replies ${withTopic ? "with" : "without"} the topic frame) and apply everything in order`, async () => {
      const { engine, stream, worker } = await setup({ topic: "kv@pod@m" });
      engine.replayWithTopic = withTopic;
      for (let q = 0; q < 4; q++) await engine.publish(q, blockBatch(q));
      for (let q = 4; q < 9; q++) await engine.publish(q, blockBatch(q, "map"), { lose: true });
      await engine.publish(9, blockBatch(9));
      await until(() => stream.lastSeq === 9 && stream.phase === "live", "caught up");
      for (let q = 10; q < 12; q++) await engine.publish(q, blockBatch(q));
      await until(() => stream.lastSeq === 11, "seq 11");
      expect(engine.requests).toEqual([4]);
      expect(depth(worker)).toBe(12);
      expect(stream.cold).toBe(false);
      expect(stream.counters).toMatchObject({ gaps: 1, replayRequests: 1, replayedBatches: 6, replayFailures: 0, corruptFrames: 0 });
    });
  }
});

describe("replay that cannot fill the gap", () => {
  it("should mark the worker cold and clear its entries when the engine refuses (END at once)", async () => {
    const { engine, stream, worker } = await setup();
    for (let q = 0; q < 5; q++) await engine.publish(q, blockBatch(q));
    await until(() => stream.lastSeq === 4);
    expect(depth(worker)).toBe(5);
    engine.replayMode = "refuse";
    await engine.publish(7, blockBatch(7));
    await until(() => stream.lastSeq === 7 && stream.phase === "live");
    expect(stream.cold).toBe(true);
    expect(hooks.treeSize(index, worker)).toBe(0);
    expect(sub.hub.isCold(worker)).toBe(true);
    expect(sub.counters()).toMatchObject({ coldStreams: 1 });
    expect(stream.counters).toMatchObject({ replayFailures: 1, coldMarks: 1 });
  });

  it("should mark the worker cold when the engine's buffer no longer holds the gap", async () => {
    const { engine, stream } = await setup();
    for (let q = 0; q < 3; q++) await engine.publish(q, blockBatch(q));
    for (let q = 3; q < 8; q++) await engine.publish(q, blockBatch(q), { lose: true });
    engine.oldestBuffered = 6;
    await engine.publish(8, blockBatch(8));
    await until(() => stream.lastSeq === 8 && stream.phase === "live");
    expect(stream.cold).toBe(true);
    expect(stream.counters).toMatchObject({ replayTooOld: 1, replayedBatches: 3 });
  });

  it("should mark the worker cold when the replay socket never answers (timeout)", async () => {
    const { engine, stream } = await setup();
    await engine.publish(0, blockBatch(0));
    engine.replayMode = "silent";
    await engine.publish(2, blockBatch(2));
    await until(() => stream.phase === "live" && stream.lastSeq === 2, "timeout");
    expect(stream.cold).toBe(true);
    expect(stream.counters.replayFailures).toBe(1);
  });

  it("should mark the worker cold at a gap when the engine has no replay endpoint", async () => {
    const { engine, stream } = await setup({ replay: false });
    await engine.publish(0, blockBatch(0));
    await engine.publish(2, blockBatch(2));
    await until(() => stream.lastSeq === 2);
    expect(stream.cold).toBe(true);
  });
});

describe("engine restart over ZeroMQ", () => {
  it("should detect the sequence going back to 0, clear the worker and index the new engine's blocks", async () => {
    const { engine, stream, worker } = await setup();
    for (let q = 0; q < 6; q++) await engine.publish(q, blockBatch(q));
    await until(() => stream.lastSeq === 5);
    expect(depth(worker)).toBe(6);
    engine.buffer.clear();
    await engine.publish(0, vllmBatch([captureStored(capture, { blocks: 2 })]));
    await until(() => stream.counters.restarts === 1);
    expect(stream.lastSeq).toBe(0);
    expect(hooks.treeSize(index, worker)).toBe(2);
    expect(depth(worker)).toBe(2);
  });
});

describe("engine process restart on the same endpoint", () => {
  it("should reconnect by itself, see the new process's seq 0 as a restart, and index only the new cache", async () => {
    const { engine, stream, worker } = await setup({ replay: false });
    for (let q = 0; q < 4; q++) await engine.publish(q, blockBatch(q));
    await until(() => stream.lastSeq === 3);
    const endpoint = engine.endpoint;
    const disconnects = sub.transport.disconnects;
    await engine.close();
    engines.splice(engines.indexOf(engine), 1);
    await until(() => sub.transport.disconnects > disconnects, "disconnect seen");
    let next: TestEngine | undefined;
    // The old socket's port is normally free at once; retry briefly in case the OS holds it.
    for (let i = 0; !next; i++) {
      try {
        next = await TestEngine.start({ endpoint });
      } catch (e) {
        if (i > 200) throw e;
        await new Promise((r) => setTimeout(r, 10));
      }
    }
    engines.push(next);
    await next.subscribed();
    await next.publish(0, vllmBatch([captureStored(capture, { blocks: 2 })]));
    await until(() => stream.counters.restarts === 1, "restart");
    expect(stream.lastSeq).toBe(0);
    expect(hooks.treeSize(index, worker)).toBe(2);
    expect(stream.cold).toBe(false);
  });
});

describe("data-parallel ranks", () => {
  it("should subscribe to port + rank for each rank and index each rank's blocks under its own slot", async () => {
    const [base, rank1] = await TestEngine.startRanks();
    engines.push(base, rank1);
    const streams = await sub.attach({ worker: "dp", endpoint: base.endpoint, blockSize: 16, dpRanks: 2 });
    await base.subscribed();
    await rank1.subscribed();
    await base.publish(0, vllmBatch([captureStored(capture, { blocks: 3 })], "array", 0));
    await rank1.publish(0, vllmBatch([captureStored(capture, { blocks: 7 })], "map", 1));
    await until(() => streams.every((s) => s.lastSeq === 0));
    const m = hooks.findMatches(index, capture.tokens, { blockSize: 16 }).matches.filter((x) => x.worker === "dp");
    expect(m.map((x) => [x.dpRank, x.blocks]).sort()).toEqual([[0, 3], [1, 7]]);
    await sub.detach("dp");
    expect(hooks.findMatches(index, capture.tokens, { blockSize: 16 }).matches.filter((x) => x.worker === "dp")).toEqual([]);
  });
});
