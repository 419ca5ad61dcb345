/**
 * @module The Node gateway's ZeroMQ transport picks its client per endpoint: kvgate's ZMTP client for tcp://, the
 * native module for ipc:// (which the ZMTP client does not speak), both feeding the same index.
 */
import { afterEach, describe, expect, it } from "vitest";
import { join } from "node:path";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import { KvEventHub } from "../../src/events/kv-event-hub.ts";
import type { KvEventStream } from "../../src/events/kv-event-stream.ts";
import { nodeTransport } from "../../src/adapter/node/zmq-transport.ts";
import { captureStored, loadCapture, until, vllmBatch } from "./helpers.ts";
import { TestEngine } from "./zmq-engine.ts";
import * as hooks from "../support/kv-index-hooks.ts";
import { tempDir } from "../support/temp-dirs.ts";

const capture = loadCapture();
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

describe("Node's ZeroMQ transport", () => {
  it.each([
    ["tcp", "zmtp"],
    ["ipc", "zeromq"],
  ] as const)("should receive a %s endpoint's events over the %s client", async (scheme, client) => {
    const index = await createKvIndex({ maxSlots: 8, capacity: 4096 });
    const endpoint = scheme === "ipc" ? `ipc://${join(tempDir("kvgate-ipc-"), "engine.sock")}` : undefined;
    const engine = await TestEngine.start({ endpoint });
    cleanup.push(() => engine.close());
    const sub = await nodeTransport(new KvEventHub(index));
    cleanup.push(() => sub.close());
    const [stream] = await sub.attach({ worker: "w", endpoint: engine.endpoint, blockSize: 16 }) as [KvEventStream];
    expect(sub.clientsOf("w")).toEqual([client]);
    await engine.subscribed();
    await engine.publish(0, vllmBatch([captureStored(capture)], "array"));
    await until(() => stream.lastSeq === 0, "seq 0");
    expect(hooks.findMatches(index, capture.tokens, { blockSize: 16 }).blocks).toBe(25);
  });
});
