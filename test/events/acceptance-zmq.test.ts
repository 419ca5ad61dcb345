import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import type { KvIndex } from "../../src/core/kv-index.ts";
import type { KvEventStream } from "../../src/events/kv-event-stream.ts";
import { ZmqKvEventSubscriber } from "../../src/zmq/kv-event-subscriber.ts";
import { engineZmtpSockets } from "../../src/zmq/zmtp-sockets.ts";
import { ALL_BLOCKS_CLEARED, blockRemoved, captureStored, loadCapture, until, vllmBatch } from "./helpers.ts";
import { TestEngine } from "./zmq-engine.ts";
import { nodeTcpDialer } from "../../src/adapter/node/tcp-dialer.ts";
import { nativeSockets } from "../../src/adapter/node/zmq-native.ts";
import * as hooks from "../support/kv-index-hooks.ts";

const capture = loadCapture();

function matched(index: KvIndex, worker: string): number {
  const m = hooks.findMatches(index, capture.tokens, { blockSize: 16 }).matches.find((x) => x.worker === worker);
  return m?.blocks ?? 0;
}

// Issue 6, acceptance 1: the BlockStored captured from a real vLLM, published over a real ZeroMQ socket in both
// encodings, makes a request for that prompt match all 25 blocks; removing the last ten leaves 15; clearing leaves 0.
// Received by both ZeroMQ clients: kvgate's ZMTP client (the gateway's for TCP on every runtime) and libzmq's.
describe.each([
  ["array", "zmtp"], ["map", "zmtp"], ["array", "zeromq"], ["map", "zeromq"],
] as const)("captured vLLM BlockStored over ZeroMQ, %s encoding, %s client", (form, client) => {
  let index: KvIndex;
  let engine: TestEngine;
  let sub: ZmqKvEventSubscriber;
  let stream: KvEventStream;
  const worker = `vllm-${form}`;

  beforeAll(async () => {
    index = await createKvIndex({ maxSlots: 8, capacity: 4096 });
    engine = await TestEngine.start({ topic: "kv@pod-0@Qwen/Qwen3-0.6B" });
    sub = new ZmqKvEventSubscriber(index, { sockets: client === "zmtp" ? engineZmtpSockets(nodeTcpDialer) : nativeSockets });
    [stream] = await sub.attach({ worker, endpoint: engine.endpoint, blockSize: 16, topic: "kv@" }) as [KvEventStream];
    expect(sub.clientsOf(worker)).toEqual([client]);
    await engine.subscribed();
  });

  afterAll(async () => {
    await sub.close();
    await engine.close();
  });

  it("should match all 25 blocks of the captured prompt after the BlockStored", async () => {
    expect(capture.hashes).toHaveLength(25);
    expect(capture.tokens).toHaveLength(400);
    expect(matched(index, worker)).toBe(0);
    await engine.publish(0, vllmBatch([captureStored(capture)], form));
    await until(() => stream.lastSeq === 0, "seq 0");
    const scores = hooks.findMatches(index, capture.tokens, { blockSize: 16 });
    expect(scores.blocks).toBe(25);
    expect(scores.matches).toEqual([{ worker, dpRank: 0, blocks: 25, treeSize: 25 }]);
    expect(stream.counters).toMatchObject({ batches: 1, storedEvents: 1, blocksStored: 25, corruptFrames: 0, gaps: 0 });
    expect(index.counters()).toMatchObject({ parentMissing: 0, invalid: 0, capacity: 0, corrupt: 0 });
  });

  it("should drop the match to 15 blocks after a BlockRemoved of the last ten hashes", async () => {
    await engine.publish(1, vllmBatch([blockRemoved(capture.hashes.slice(15))], form));
    await until(() => stream.lastSeq === 1, "seq 1");
    expect(matched(index, worker)).toBe(15);
    expect(index.counters().unknownRemoved).toBe(0);
  });

  it("should drop the match to 0 after AllBlocksCleared", async () => {
    await engine.publish(2, vllmBatch([ALL_BLOCKS_CLEARED], form));
    await until(() => stream.lastSeq === 2, "seq 2");
    expect(matched(index, worker)).toBe(0);
    expect(hooks.treeSize(index, worker, 0)).toBe(0);
    expect(sub.counters()).toMatchObject({ batches: 3, storedEvents: 1, removedEvents: 1, clearedEvents: 1, blocksRemoved: 10, coldStreams: 0 });
  });
});
