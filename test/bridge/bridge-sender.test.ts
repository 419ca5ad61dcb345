/**
 * @module The bridge's HTTP half against a real gateway app (its fetch injected, no sockets): batching, retry after
 * a lost answer without double application, bounded queue with backpressure, refusals counted, and the kv-frames
 * body codec.
 */
import { describe, expect, it } from "vitest";
import { encodeSeq } from "../../src/events/zmq-frames.ts";
import { decodeKvFrames, encodeKvFrames, type KvFrame } from "../../src/events/kv-frames.ts";
import { BridgeSender } from "../../src/bridge/bridge-sender.ts";
import { fakeGateway } from "../gateway/fake-workers.ts";
import { TOKEN } from "../gateway/helpers.ts";
import { blockRemoved, captureStored, loadCapture, vllmBatch } from "../events/helpers.ts";
import * as hooks from "../support/kv-index-hooks.ts";

const capture = loadCapture();
const enc = new TextEncoder();
const frame = (seq: number, payload: Uint8Array, topic = "kv@w1@m"): KvFrame => ({ seq: encodeSeq(seq), topic: enc.encode(topic), payload });
/** Batches that each change the index: the whole prompt, then one block removed at a time from the end. */
const batches = [vllmBatch([captureStored(capture)]), ...capture.hashes.slice(1).reverse().map((h) => vllmBatch([blockRemoved([h])]))];

async function setup() {
  const g = await fakeGateway(2, [], ",kv_events=true,block_size=16");
  const gwFetch: typeof fetch = (input, init) => Promise.resolve(g.gw.fetch(new Request(input as string, init)));
  const matched = () => hooks.findMatches(g.gw.state.index, capture.tokens, { blockSize: 16 }).matches.find((m) => m.worker === "w1")?.blocks ?? 0;
  return { ...g, gwFetch, matched };
}

const noWait = () => Promise.resolve();
/** No backoff, but a turn of the event loop: a refused POST answered in microtasks alone would never let a timer run. */
const nextTurn = () => new Promise<void>((r) => setTimeout(r, 0));

describe("kv-frames body", () => {
  it("should round-trip messages byte for byte and reject truncated bodies with a typed error", () => {
    const frames = [frame(0, batches[0]!), frame(2 ** 40, new Uint8Array(0), "")];
    const body = encodeKvFrames(frames);
    const back = decodeKvFrames(body);
    expect(back.map((f) => [Buffer.from(f.seq).toString("hex"), new TextDecoder().decode(f.topic), f.payload.length]))
      .toEqual([["0000000000000000", "kv@w1@m", batches[0]!.length], ["0000010000000000", "", 0]]);
    expect(Buffer.from(back[0]!.payload).equals(Buffer.from(batches[0]!))).toBe(true);
    expect(() => decodeKvFrames(body.subarray(0, body.length - 1))).toThrow(/truncated/);
    expect(() => decodeKvFrames(new Uint8Array([1, 2, 3, 4]))).toThrow(/KVF1/);
  });
});

describe("BridgeSender against a gateway", () => {
  it("should batch frames, and apply a POST once when its answer was lost and it was sent again", async () => {
    const { gwFetch, gw, matched } = await setup();
    let posts = 0, dropAnswers = 1;
    const lossy: typeof fetch = async (input, init) => {
      const res = await gwFetch(input, init);
      posts++;
      // The router applied the POST, but its answer never reached the bridge.
      if (posts > 1 && dropAnswers-- > 0) throw new TypeError("fetch failed: socket hang up");
      return res;
    };
    // Flush waits are real (0 ms) timers, so the ten pushes below are all queued before the first batch goes.
    const sender = new BridgeSender({ url: "http://kvgate.test/admin/kv-events", token: TOKEN, worker: "w1", fetch: lossy, sleep: () => new Promise((r) => setTimeout(r, 0)), maxBatchFrames: 4 });
    expect(await sender.hello()).toBe(-1);
    for (let s = 0; s < 10; s++) expect(await sender.push(frame(s, batches[s]!))).toBe(true);
    await sender.close();
    const st = gw.state.ingest.hub.get("w1", 0)!;
    expect(st.lastSeq).toBe(9);
    expect(st.counters).toMatchObject({ batches: 10, gaps: 0, restarts: 0, staleBatches: 0, coldMarks: 0 });
    expect(matched()).toBe(16);
    expect(sender.stats).toMatchObject({ sentFrames: 10, failures: 1, rejectedFrames: 0, abandonedFrames: 0, routerLastSeq: 9 });
    // hello + ceil(10 / 4) batches + one resend.
    expect(sender.stats.posts).toBe(1 + 3 + 1);
    expect(gw.state.metrics.kvBatches.get({ result: "duplicate_post" })).toBeGreaterThan(0);
  });

  it("should hold the caller back while the queue is full, never holding more than its bound", async () => {
    const { gwFetch, gw } = await setup();
    let release!: () => void;
    let gate = new Promise<void>((r) => (release = r));
    const slow: typeof fetch = async (input, init) => {
      await gate;
      return gwFetch(input, init);
    };
    const sender = new BridgeSender({ url: "http://kvgate.test/admin/kv-events", token: TOKEN, worker: "w1", fetch: slow, sleep: noWait, maxQueueFrames: 3, maxBatchFrames: 2 });
    const pushed: number[] = [];
    let maxQueued = 0;
    const producer = (async () => {
      for (let s = 0; s < 8; s++) {
        await sender.push(frame(s, batches[s]!));
        pushed.push(s);
        maxQueued = Math.max(maxQueued, sender.stats.queuedFrames);
      }
    })();
    for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 1));
    // The router answers nothing yet: three frames fit, the fourth push waits.
    expect(pushed).toEqual([0, 1, 2]);
    expect(sender.stats.backpressureWaits).toBe(1);
    release();
    gate = Promise.resolve();
    await producer;
    await sender.close();
    expect(maxQueued).toBeLessThanOrEqual(3);
    expect(gw.state.ingest.hub.get("w1", 0)!.lastSeq).toBe(7);
    expect(sender.stats).toMatchObject({ sentFrames: 8, abandonedFrames: 0 });
  });

  it("should retry while the router refuses the token or the worker, and drop (counted) what it rejects for good", async () => {
    const { gwFetch, gw } = await setup();
    let n = 0;
    const flaky: typeof fetch = (input, init) => (n++ < 2 ? Promise.resolve(new Response("busy", { status: 503 })) : gwFetch(input, init));
    const wrongToken = new BridgeSender({ url: "http://kvgate.test/admin/kv-events", token: "nope", worker: "w1", fetch: flaky, sleep: nextTurn });
    await wrongToken.push(frame(0, batches[0]!));
    // Until it has been refused a few times (on a loaded machine 20 ms may hold only three attempts); the test timeout bounds it.
    while (wrongToken.stats.failures <= 3) await new Promise((r) => setTimeout(r, 5));
    // 503 twice, then 401 over and over: nothing applied, nothing dropped, still queued.
    expect(wrongToken.stats).toMatchObject({ sentFrames: 0, rejectedFrames: 0, queuedFrames: 1 });
    expect(wrongToken.stats.failures).toBeGreaterThan(3);
    await wrongToken.close(0);
    expect(wrongToken.stats.abandonedFrames).toBe(1);
    expect(gw.state.ingest.hub.get("w1", 0)).toBeUndefined();

    const badRank = new BridgeSender({ url: "http://kvgate.test/admin/kv-events", token: TOKEN, worker: "w1", dpRank: 5, fetch: gwFetch, sleep: noWait });
    await badRank.push(frame(0, batches[0]!));
    await badRank.close();
    expect(badRank.stats).toMatchObject({ sentFrames: 0, rejectedFrames: 1 });
  });

  it("should back off exponentially, with defaults kept for options passed as undefined (unset CLI flags)", async () => {
    const waits: number[] = [];
    let sender!: BridgeSender;
    const sleep = async (ms: number) => {
      waits.push(ms);
      if (waits.length === 8) void sender.close(0);
    };
    sender = new BridgeSender({
      url: "http://kvgate.test/admin/kv-events", token: TOKEN, worker: "w1", sleep, retryMaxMs: undefined, maxBatchFrames: undefined,
      fetch: () => Promise.reject(new TypeError("fetch failed")),
    });
    expect(await sender.hello()).toBe(-1);
    expect(waits).toEqual([100, 200, 400, 800, 1600, 3200, 5000, 5000]);
  });

  it("should count a frame that does not decode without losing the others of its POST", async () => {
    const { gwFetch, gw, matched } = await setup();
    const sender = new BridgeSender({ url: "http://kvgate.test/admin/kv-events", token: TOKEN, worker: "w1", fetch: gwFetch, sleep: noWait });
    await sender.push(frame(0, batches[0]!));
    await sender.push(frame(1, new Uint8Array([0xc1, 0xc1])));
    await sender.push(frame(2, batches[0]!));
    await sender.close();
    const st = gw.state.ingest.hub.get("w1", 0)!;
    expect(st.counters).toMatchObject({ corruptFrames: 1, batches: 2, gaps: 1 });
    // The undecodable batch is a lost batch: the worker is cold; the index holds the prompt again, but untrusted.
    expect(st.cold).toBe(true);
    expect(matched()).toBe(25);
    const routed = await (await gw.fetch(new Request("http://kvgate.test/v1/route", { method: "POST", body: JSON.stringify({ model: "m", prompt: capture.tokens }) }))).json() as { overlap_blocks: number };
    expect(routed.overlap_blocks).toBe(0);
  });
});
