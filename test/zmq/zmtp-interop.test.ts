/**
 * @module kvgate's ZMTP client against real libzmq 4.3 (the npm `zeromq` module) on loopback: a PUB sending
 * [topic, seq, payload] messages with short and long frames, a ROUTER replay server, a PUB restarting on the same
 * port, a subscriber too slow to keep up, heartbeats — and the KV-event subscriber on this transport end to end.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Publisher, Router, XPublisher } from "zeromq";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import { encodeSeq, readSeq } from "../../src/events/zmq-frames.ts";
import type { KvEventStream } from "../../src/events/kv-event-stream.ts";
import { ZmqKvEventSubscriber } from "../../src/zmq/kv-event-subscriber.ts";
import { ZmqReplayClient } from "../../src/zmq/zmq-replay-client.ts";
import { zmtpDealer, zmtpSockets, zmtpSubscriber, type ZmtpOptions } from "../../src/zmq/zmtp-sockets.ts";
import { payload, sizes } from "../events/frame-payloads.ts";
import { captureStored, loadCapture, until, vllmBatch } from "../events/helpers.ts";
import { TestEngine } from "../events/zmq-engine.ts";
import { eventually } from "./zmtp-peer.ts";
import { nodeTcpDialer } from "../../src/adapter/node/tcp-dialer.ts";
import * as hooks from "../support/kv-index-hooks.ts";

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

function sub(opts: ZmtpOptions = {}) {
  const s = zmtpSubscriber(nodeTcpDialer, { reconnectIntervalMs: 5, reconnectMaxIntervalMs: 20, ...opts });
  cleanup.push(() => s.close());
  return s;
}

/** A libzmq publisher and a subscriber to `topic` connected to it. */
async function pubSub(topic: string, opts: ZmtpOptions = {}): Promise<{ p: Publisher; s: ReturnType<typeof sub> }> {
  const p = await pub();
  const s = sub(opts);
  s.subscribe(topic);
  s.connect(p.lastEndpoint!);
  return { p, s };
}

async function pub(endpoint = "tcp://127.0.0.1:*"): Promise<Publisher> {
  for (let attempt = 0; ; attempt++) {
    const p = new Publisher({ linger: 0, sendHighWaterMark: 1_000_000 });
    try {
      await p.bind(endpoint);
      cleanup.push(() => p.close());
      return p;
    } catch (e) {
      p.close();
      // Rebinding a port just freed can briefly collide with a connection attempt's own source port.
      if (attempt >= 50) throw e;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

/** Reads a socket's messages, skipping the [topic, "probe"] messages `probe` publishes. */
class Reader {
  readonly #it: AsyncIterator<Uint8Array[]>;

  constructor(s: AsyncIterable<Uint8Array[]>) {
    this.#it = s[Symbol.asyncIterator]();
  }

  /** Publishes a probe until one arrives: a plain PUB cannot tell when a subscription reached it. */
  async probe(p: Publisher, topic: string): Promise<void> {
    let got = false;
    const first = this.#raw().then(() => (got = true));
    while (!got) {
      await p.send([topic, "probe"]);
      await new Promise((r) => setTimeout(r, 5));
    }
    await first;
  }

  /** The next `n` messages that are not probes. */
  async take(n: number): Promise<Uint8Array[][]> {
    const out: Uint8Array[][] = [];
    while (out.length < n) {
      const m = await this.#raw();
      if (!(m.length === 2 && Buffer.from(m[1]!).toString() === "probe")) out.push(m);
    }
    return out;
  }

  async #raw(): Promise<Uint8Array[]> {
    const r = await this.#it.next();
    if (r.done) throw new Error("socket closed");
    return r.value;
  }
}

describe("ZMTP SUB ← libzmq PUB", () => {
  it.each([
    ["the default shared 4 MiB read buffer", undefined],
    // Reads this small end inside frame headers now and then: undecoded bytes must be copied before the next read.
    ["a 509-byte read buffer (most frames split across reads)", 509],
    ["a fresh chunk per read", 0],
  ])("should receive every [topic, seq, payload] of its topic exactly, in order, short and long frames, with %s", async (_, readBufferBytes) => {
    const { p, s } = await pubSub("kv@pod-a", { readBufferBytes });
    const r = new Reader(s);
    await r.probe(p, "kv@pod-a");
    const N = 3_000;
    const sending = (async () => {
      for (let i = 0; i < N; i++) {
        await p.send(["kv@pod-b@m", encodeSeq(i), payload(i, 10)]);
        await p.send(["kv@pod-a@m", encodeSeq(i), payload(i, sizes(i))]);
      }
    })();
    const got = await r.take(N);
    await sending;
    got.forEach((m, i) => {
      expect(m.length).toBe(3);
      expect(Buffer.from(m[0]!).toString()).toBe("kv@pod-a@m");
      expect(readSeq(m[1])).toBe(i);
      // Buffer.equals: toEqual walks a 70 kB array element by element, far too slowly for thousands of them.
      expect(Buffer.from(m[2]!).equals(payload(i, sizes(i))), `payload of seq ${i}`).toBe(true);
    });
    // libzmq filtered at the publisher (it applied the 0x01 subscription); nothing reached the local filter.
    expect(s.counters).toMatchObject({ connects: 1, protocolErrors: 0, filtered: 0 });
  });

  it.each([
    ["the default shared 4 MiB read buffer", undefined],
    ["a 509-byte read buffer", 509],
  ])("should hand every message to a listener as it is decoded, exactly and in order, with %s", async (_, readBufferBytes) => {
    const { p, s } = await pubSub("kv@pod-a", { readBufferBytes });
    const got: Uint8Array[][] = [];
    let threw = 0, warmed = false;
    const WARM = 2 ** 32;
    const listening = s.listen((frames) => {
      const seq = readSeq(frames[1]);
      if (seq === WARM) return void (warmed = true);
      // A listener that throws loses that message only; reading goes on.
      if (seq === 7 && threw++ === 0) throw new Error("listener failed");
      // Frames are valid during the call only: keep copies.
      got.push(frames.map((f) => f.slice()));
    });
    // A plain PUB cannot tell when the subscription reached it: publish until one arrives.
    while (!warmed) {
      await p.send(["kv@pod-a@m", encodeSeq(WARM), new Uint8Array(0)]);
      await new Promise((r) => setTimeout(r, 5));
    }
    const N = 2_000;
    for (let i = 0; i < N; i++) {
      await p.send(["kv@pod-b@m", encodeSeq(i), payload(i, 10)]);
      await p.send(["kv@pod-a@m", encodeSeq(i), payload(i, sizes(i))]);
    }
    await eventually(() => got.length >= N - 1, "every message");
    expect(got.map((m) => readSeq(m[1]))).toEqual(Array.from({ length: N }, (_, i) => i).filter((i) => i !== 7));
    for (const m of got) {
      const i = readSeq(m[1]);
      expect(Buffer.from(m[2]!).equals(payload(i, sizes(i))), `payload of seq ${i}`).toBe(true);
    }
    expect(s.counters).toMatchObject({ listenerErrors: 1, lastError: "listener failed", protocolErrors: 0, pauses: 0 });
    expect(s.queued.messages).toBe(0);
    s.close();
    await listening;
  });

  it("should hand a listener the messages queued before it, first and in order", async () => {
    const { p, s } = await pubSub("t");
    let seq = 0;
    // Nobody iterates yet: what arrives is queued (as copies).
    while (s.queued.messages < 3) {
      await p.send(["t", encodeSeq(seq++), payload(seq, 300)]);
      await new Promise((r) => setTimeout(r, 5));
    }
    const got: number[] = [];
    const listening = s.listen((frames) => void got.push(readSeq(frames[1])));
    const first = got[0]!;
    expect(got.length).toBeGreaterThanOrEqual(3);
    expect(s.queued.messages).toBe(0);
    for (let i = 0; i < 50; i++) await p.send(["t", encodeSeq(seq++), payload(seq, 300)]);
    await eventually(() => got.at(-1) === seq - 1, "the last message");
    expect(got).toEqual(Array.from({ length: seq - first }, (_, i) => first + i));
    expect(() => s.listen(() => {})).toThrow(/already has a listener/);
    s.close();
    await listening;
  });

  it("should send the subscription libzmq's XPUB reads as 0x01 + prefix", async () => {
    const x = new XPublisher({ linger: 0 });
    await x.bind("tcp://127.0.0.1:*");
    cleanup.push(() => x.close());
    const s = sub();
    s.subscribe("kv@");
    s.connect(x.lastEndpoint!);
    const [msg] = await x.receive();
    expect(Buffer.from(msg!).toString("latin1")).toBe("\x01kv@");
  });

  it("should wait for a publisher that is not up yet, and reconnect when it restarts on the same port", async () => {
    const first = await pub();
    const endpoint = first.lastEndpoint!;
    first.close();
    const s = sub();
    s.subscribe("");
    s.connect(endpoint);
    await eventually(() => s.counters.connectFailures >= 2, "refused connects");
    // libzmq closes a listener asynchronously: the first connect can still reach the closed publisher and be dropped.
    // Refused connects prove it is gone, so count from here.
    const base = { connects: s.counters.connects, disconnects: s.counters.disconnects };
    const r = new Reader(s);
    const p1 = await pub(endpoint);
    await r.probe(p1, "t");
    await p1.send(["t", "one"]);
    expect((await r.take(1))[0]!.map((f) => Buffer.from(f).toString())).toEqual(["t", "one"]);
    expect(s.counters.connects - base.connects).toBe(1);
    p1.close();
    await eventually(() => s.counters.disconnects > base.disconnects, "the disconnect");
    // As above: once a reconnect is refused, p1's listener is gone and the next connect can only be p2's.
    const refused = s.counters.connectFailures;
    await eventually(() => s.counters.connectFailures > refused, "a refused reconnect");
    const again = { connects: s.counters.connects, disconnects: s.counters.disconnects };
    const p2 = await pub(endpoint);
    await r.probe(p2, "t");
    await p2.send(["t", "two"]);
    expect((await r.take(1))[0]!.map((f) => Buffer.from(f).toString())).toEqual(["t", "two"]);
    expect({ connects: s.counters.connects - again.connects, disconnects: s.counters.disconnects - again.disconnects }).toEqual({ connects: 1, disconnects: 0 });
    expect(s.counters.protocolErrors).toBe(0);
  });

  it("should stop reading when its queue is full and lose nothing the publisher kept", async () => {
    const { p, s } = await pubSub("", { receiveHighWaterMark: 16 });
    const r = new Reader(s);
    await r.probe(p, "t");
    const N = 2_000;
    for (let i = 0; i < N; i++) await p.send(["t", encodeSeq(i), payload(i, 300)]);
    await eventually(() => s.counters.pauses >= 1, "the queue to fill");
    // Nothing decoded past the mark: the rest waits in the kernel and in libzmq's queue.
    expect(s.queued.messages).toBeLessThanOrEqual(16);
    const got = await r.take(N);
    expect(got.map((m) => readSeq(m[1]))).toEqual(Array.from({ length: N }, (_, i) => i));
    expect(s.counters.pauses).toBeGreaterThanOrEqual(1);
  });

  it("should bind and take messages from every libzmq publisher that connects (engine configured to connect)", async () => {
    const s = sub();
    s.subscribe("kv@");
    await s.bind("tcp://127.0.0.1:*");
    expect(s.lastEndpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
    const pubs = [new Publisher({ linger: 0 }), new Publisher({ linger: 0 })];
    for (const p of pubs) {
      cleanup.push(() => p.close());
      p.connect(s.lastEndpoint!);
    }
    const r = new Reader(s);
    for (const [i, p] of pubs.entries()) {
      await r.probe(p, `kv@${i}`);
      await p.send([`kv@${i}`, encodeSeq(i), payload(i, 300)]);
      const [m] = await r.take(1);
      expect(Buffer.from(m![0]!).toString()).toBe(`kv@${i}`);
      expect(readSeq(m![1])).toBe(i);
    }
    expect(s.counters).toMatchObject({ connects: 2, protocolErrors: 0 });
    // Closing releases the port: the same endpoint can be bound again at once.
    s.close();
    await sub().bind(s.lastEndpoint!);
  });

  it("should heartbeat a ZMTP 3.1 libzmq peer, which answers every PING", async () => {
    const { p, s } = await pubSub("", { heartbeatIntervalMs: 5, heartbeatTimeoutMs: 10_000 });
    await eventually(() => s.counters.pongsReceived >= 3, "three PONGs");
    expect(s.counters).toMatchObject({ connects: 1, disconnects: 0, protocolErrors: 0 });
  });
});

describe("ZMTP DEALER ↔ libzmq ROUTER", () => {
  it("should round-trip [b'', seq] requests and multi-frame replies, short and long", async () => {
    const router = new Router({ linger: 0 });
    await router.bind("tcp://127.0.0.1:*");
    cleanup.push(() => router.close());
    const seen: Buffer[][] = [];
    void (async () => {
      for await (const [id, ...rest] of router) {
        seen.push(rest);
        await router.send([id!, "", "kv@t", rest[1]!, Buffer.alloc(4000, 9)]);
        await router.send([id!, "", "end"]);
      }
    })().catch(() => undefined);
    const d = zmtpDealer(nodeTcpDialer, 5_000);
    cleanup.push(() => d.close());
    d.connect(router.lastEndpoint!);
    await d.send([new Uint8Array(0), encodeSeq(42)]);
    const r1 = await d.receive();
    const r2 = await d.receive();
    expect(seen).toHaveLength(1);
    expect(seen[0]!.map((f) => f.length)).toEqual([0, 8]);
    expect(readSeq(seen[0]![1])).toBe(42);
    expect(r1.map((f) => f.length)).toEqual([0, 4, 8, 4000]);
    expect(readSeq(r1[2])).toBe(42);
    expect(r2.map((f) => Buffer.from(f).toString())).toEqual(["", "end"]);
    expect(d.counters).toMatchObject({ connects: 1, protocolErrors: 0 });
  });

  it("should replay from the engine's ROUTER through ZmqReplayClient, with and without the topic frame", async () => {
    const engine = await TestEngine.start({ replay: true, topic: "kv@x" });
    cleanup.push(() => engine.close());
    for (let q = 0; q < 5; q++) engine.buffer.set(q, payload(q, q === 3 ? 5_000 : 20));
    const client = new ZmqReplayClient(engine.replayEndpoint!, { sockets: zmtpSockets(nodeTcpDialer), timeoutMs: 5_000 });
    cleanup.push(() => client.close());
    for (const withTopic of [true, false]) {
      engine.replayWithTopic = withTopic;
      const got: number[] = [];
      for await (const f of client.replay(2)) {
        expect(Buffer.from(f.payload).equals(payload(f.seq, f.seq === 3 ? 5_000 : 20))).toBe(true);
        got.push(f.seq);
      }
      expect(got).toEqual([2, 3, 4]);
    }
    expect(engine.requests).toEqual([2, 2]);
  });

  it("should time out a send when no ROUTER is up, and a receive when it never answers", async () => {
    const engine = await TestEngine.start({ replay: true });
    cleanup.push(() => engine.close());
    engine.replayMode = "silent";
    const silent = new ZmqReplayClient(engine.replayEndpoint!, { sockets: zmtpSockets(nodeTcpDialer), timeoutMs: 50 });
    await expect(silent.replay(0).next()).rejects.toThrow(/replay from .* no ZeroMQ message within 50 ms/);
    const nobody = new ZmqReplayClient("tcp://127.0.0.1:1", { sockets: zmtpSockets(nodeTcpDialer, { reconnectIntervalMs: 5 }), timeoutMs: 50 });
    await expect(nobody.replay(0).next()).rejects.toThrow(/replay request .* no ZeroMQ peer to send to within 50 ms/);
  });
});

describe("ZmqKvEventSubscriber over the ZMTP client", () => {
  it("should apply the captured vLLM BlockStored from a libzmq publisher: 25/25 blocks", async () => {
    const capture = loadCapture();
    const index = await createKvIndex({ maxSlots: 8, capacity: 4096 });
    const engine = await TestEngine.start({ topic: "kv@pod-0@Qwen/Qwen3-0.6B", replay: true });
    cleanup.push(() => engine.close());
    const kv = new ZmqKvEventSubscriber(index, { sockets: zmtpSockets(nodeTcpDialer) });
    cleanup.push(() => kv.close());
    const [stream] = (await kv.attach({ worker: "w", endpoint: engine.endpoint, replayEndpoint: engine.replayEndpoint, blockSize: 16, topic: "kv@" })) as [KvEventStream];
    await engine.subscribed();
    await engine.publish(0, vllmBatch([captureStored(capture, { blocks: 10 })], "map"));
    await engine.publish(1, vllmBatch([captureStored(capture, { from: 10, blocks: 5 })]), { lose: true });
    await engine.publish(2, vllmBatch([captureStored(capture, { from: 15 })]));
    await until(() => stream.lastSeq === 2 && stream.phase === "live", "seq 2 after the replay");
    await stream.settled();
    expect(hooks.findMatches(index, capture.tokens, { blockSize: 16 }).matches).toEqual([{ worker: "w", dpRank: 0, blocks: 25, treeSize: 25 }]);
    expect(engine.requests).toEqual([1]);
    expect(kv.counters()).toMatchObject({ connects: 1, protocolErrors: 0, socketErrors: 0, gaps: 1, corruptFrames: 0 });
  });
});
