/**
 * @module kvgate's ZMTP client against hand-written peers: the exact bytes it sends (greeting, READY, 0x01-prefixed
 * subscription, PONG), its own topic filter, and every kind of broken or hostile peer — each must end as a counted
 * protocol error on that connection (then a reconnect), never a crash and never a buffer sized by the peer.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import { ZmqKvEventSubscriber } from "../../src/zmq/kv-event-subscriber.ts";
import { zmtpSockets, zmtpSubscriber, type ZmtpOptions } from "../../src/zmq/zmtp-sockets.ts";
import { actAsPublisher, command, eventually, frame, greeting, message, ready, rawPeer, type RawPeer } from "./zmtp-peer.ts";
import { nodeTcpDialer } from "../../src/adapter/node/tcp-dialer.ts";

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function peer(onConnection: Parameters<typeof rawPeer>[0]): Promise<RawPeer> {
  const p = await rawPeer(onConnection);
  cleanup.push(() => p.close());
  return p;
}

function sub(opts: ZmtpOptions = {}) {
  const s = zmtpSubscriber(nodeTcpDialer, { reconnectIntervalMs: 5, reconnectMaxIntervalMs: 20, ...opts });
  cleanup.push(() => s.close());
  return s;
}

async function collect(s: AsyncIterable<Uint8Array[]>, n: number): Promise<Uint8Array[][]> {
  const out: Uint8Array[][] = [];
  for await (const m of s) {
    out.push(m);
    if (out.length === n) break;
  }
  return out;
}

const text = (b: Uint8Array): string => Buffer.from(b).toString("latin1");

describe("what the ZMTP client sends", () => {
  it("should send a 3.1 NULL greeting, READY with Socket-Type SUB, then each subscription as a 0x01-prefixed message", async () => {
    const p = await peer((sock) => actAsPublisher(sock));
    const s = sub();
    s.subscribe("kv@");
    s.connect(p.endpoint);
    s.subscribe("other");
    const sent = () => p.received(0);
    const readyFrame = Buffer.concat([Buffer.from([0x04, 25, 5]), Buffer.from("READY"), Buffer.from([11]), Buffer.from("Socket-Type"), Buffer.from([0, 0, 0, 3]), Buffer.from("SUB")]);
    const expected = Buffer.concat([
      Buffer.from([0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 1]), Buffer.from("NULL"), Buffer.alloc(16 + 1 + 31),
      readyFrame,
      Buffer.from([0x00, 4, 0x01]), Buffer.from("kv@"),
      Buffer.from([0x00, 6, 0x01]), Buffer.from("other"),
    ]);
    await eventually(() => sent().length >= expected.length, "greeting, READY and both subscriptions");
    expect(sent().toString("hex")).toBe(expected.toString("hex"));
    expect(s.counters).toMatchObject({ connects: 1, protocolErrors: 0 });
  });

  it("should answer a PING with a PONG carrying its context, between messages", async () => {
    const p = await peer((sock) => {
      actAsPublisher(sock);
      sock.write(Buffer.concat([message(["t", "one"]), command("PING", Buffer.from("\x00\x00ctx-1", "latin1")), message(["t", "two"])]));
    });
    const s = sub();
    s.subscribe("");
    s.connect(p.endpoint);
    const got = await collect(s, 2);
    expect(got.map((m) => m.map(text))).toEqual([["t", "one"], ["t", "two"]]);
    const pong = Buffer.concat([Buffer.from([0x04, 10, 4]), Buffer.from("PONGctx-1")]);
    await eventually(() => p.received(0).includes(pong), "the PONG");
    expect(s.counters.pingsAnswered).toBe(1);
  });

  it("should keep only messages matching a subscription when the publisher does not filter, with short and long frames", async () => {
    const big = Buffer.alloc(70_000, 7);
    const p = await peer((sock) => {
      actAsPublisher(sock);
      sock.write(Buffer.concat([
        message(["kv@a", "1", Buffer.alloc(255, 1)]),
        message(["zz@a", "2", big]),
        message(["kv@", "3"]),
        message(["kv@abc", "4", big]),
        // A short payload in a long frame is legal (the size field is just longer).
        Buffer.concat([frame("kv@a", { more: true }), frame("5", { long: true })]),
      ]));
    });
    const s = sub();
    s.subscribe("kv@a");
    s.connect(p.endpoint);
    const got = await collect(s, 3);
    expect(got.map((m) => text(m[1]!))).toEqual(["1", "4", "5"]);
    expect(got[0]![2]).toEqual(new Uint8Array(255).fill(1));
    expect(got[1]![2]!.length).toBe(70_000);
    expect(got[1]![2]!.every((b) => b === 7)).toBe(true);
    expect(s.counters.filtered).toBe(2);
  });
});

type Case = [name: string, reason: string, serve: (sock: import("node:net").Socket) => void, opts?: ZmtpOptions];
const LIMITS: ZmtpOptions = { maxMessageBytes: 1024 * 1024, maxFrames: 64, maxCommandBytes: 4096 };
const hello = (): Buffer => Buffer.concat([greeting(), ready("PUB")]);

const CASES: Case[] = [
  ["an HTTP server", "bad-signature", (s) => s.write("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")],
  ["a ZMTP 2.0 peer", "bad-version", (s) => s.write(greeting({ major: 1 }))],
  ["a PLAIN mechanism", "bad-mechanism", (s) => s.write(greeting({ mechanism: "PLAIN" }))],
  ["a ROUTER instead of a publisher", "incompatible-peer", (s) => s.write(Buffer.concat([greeting(), ready("ROUTER")]))],
  ["a READY without Socket-Type", "bad-ready", (s) => s.write(Buffer.concat([greeting(), command("READY")]))],
  ["a READY whose property overruns it", "bad-ready", (s) => s.write(Buffer.concat([greeting(), command("READY", Buffer.from([11, ...Buffer.from("Socket-Type"), 0, 0, 0, 200, 65]))]))],
  ["a message before READY", "unexpected-message", (s) => s.write(Buffer.concat([greeting(), message(["kv", "x"])]))],
  ["a frame length of 2^62", "frame-too-large", (s) => s.write(Buffer.concat([hello(), Buffer.from([0x02, 0x40, 0, 0, 0, 0, 0, 0, 0])]))],
  ["a frame length of 4 GiB − 1 (body never sent)", "frame-too-large", (s) => s.write(Buffer.concat([hello(), Buffer.from([0x02, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff])]))],
  ["frames adding up past the message limit", "frame-too-large", (s) => s.write(Buffer.concat([hello(), frame(Buffer.alloc(600_000), { more: true }), Buffer.from([0x02, 0, 0, 0, 0, 0, 0x09, 0x27, 0xc0])]))],
  ["a message of 100 frames", "too-many-frames", (s) => s.write(Buffer.concat([hello(), ...Array.from({ length: 100 }, () => frame("", { more: true }))]))],
  ["reserved flag bits", "bad-frame", (s) => s.write(Buffer.concat([hello(), Buffer.from([0x80, 1, 0])]))],
  ["a command with MORE", "bad-frame", (s) => s.write(Buffer.concat([hello(), Buffer.from([0x05, 5, 4, ...Buffer.from("PING")])]))],
  ["a command over the command limit", "frame-too-large", (s) => s.write(Buffer.concat([hello(), Buffer.from([0x06, 0, 0, 0, 0, 0, 0, 0x20, 0])]))],
  ["a command with a bad name size", "bad-command", (s) => s.write(Buffer.concat([hello(), Buffer.from([0x04, 2, 9, 65])]))],
  ["a PING with a 17-byte context", "bad-command", (s) => s.write(Buffer.concat([hello(), command("PING", Buffer.alloc(19))]))],
  ["an ERROR command", "peer-error", (s) => s.write(Buffer.concat([greeting(), command("ERROR", Buffer.from("\x0cgo away now!", "latin1"))]))],
  ["a peer that never greets", "handshake-timeout", () => {}, { handshakeTimeoutMs: 20 }],
  ["a publisher that stops answering", "heartbeat-timeout", (s) => s.write(Buffer.concat([hello()])), { heartbeatIntervalMs: 5, heartbeatTimeoutMs: 20 }],
];

describe("broken and hostile peers", () => {
  it.each(CASES)("should close the connection to %s (%s), count it and reconnect", async (_name, reason, serve, opts) => {
    const p = await peer((sock) => serve(sock));
    const errors: Error[] = [];
    const s = sub({ ...LIMITS, ...opts, onError: (e) => errors.push(e) });
    s.subscribe("");
    s.connect(p.endpoint);
    // Two failed connections: the first was counted and closed, and the socket came back.
    await eventually(() => s.counters.protocolErrors >= 2, `two ${reason} errors`);
    expect(errors[0]).toMatchObject({ name: "ZmtpError", reason, code: "KVGATE_ERR_UPSTREAM" });
    expect(s.counters.lastError).toContain(`ZMTP ${reason}`);
    expect(p.sockets.length).toBeGreaterThanOrEqual(2);
    expect(s.queued).toEqual({ messages: 0, bytes: 0 });
    if (reason === "incompatible-peer") {
      // Told why before the close, as libzmq does.
      expect(p.received(0).includes(Buffer.concat([Buffer.from([0x04, 26, 5]), Buffer.from("ERROR"), Buffer.from([19]), Buffer.from("Invalid socket type")]))).toBe(true);
    }
  });

  it("should close a peer that floods PINGs without reading the PONGs", async () => {
    const ping = command("PING", Buffer.from([0, 0]));
    const burst = Buffer.concat(Array.from({ length: 10_000 }, () => ping));
    const p = await peer((sock) => {
      sock.pause();
      sock.write(hello());
      // PINGs for as long as the client reads them: its PONGs pile up once the kernel buffers are full.
      const flood = (): void => {
        while (!sock.destroyed && sock.write(burst));
        if (!sock.destroyed) sock.once("drain", flood);
      };
      flood();
    });
    const s = sub({ maxWriteBufferBytes: 64 * 1024 });
    s.subscribe("");
    s.connect(p.endpoint);
    await eventually(() => s.counters.protocolErrors >= 1, "peer-not-reading");
    expect(s.counters.lastError).toContain("ZMTP peer-not-reading");
    s.close();
  });

  it("should accept no more than maxConnections peers on a bound socket", async () => {
    const s = sub({ maxConnections: 2 });
    s.subscribe("");
    await s.bind("tcp://127.0.0.1:*");
    const { connect } = await import("node:net");
    const port = Number(/:(\d+)$/.exec(s.lastEndpoint!)![1]);
    const clients = Array.from({ length: 3 }, () => connect({ host: "127.0.0.1", port }));
    const closed = clients.map((c) => new Promise<void>((r) => c.on("close", () => r())));
    for (const c of clients) {
      c.on("error", () => {});
      cleanup.push(() => c.destroy());
      c.write(Buffer.concat([greeting(), ready("PUB")]));
    }
    await eventually(() => s.counters.connects === 2 && s.counters.connectFailures === 1, "two peers in, one turned away");
    // The third was closed at accept; the first two stay.
    await Promise.race(closed);
    expect(clients.filter((c) => c.destroyed || c.readableEnded)).toHaveLength(1);
  });

  it("should count a hostile engine in the KV-event subscriber's transport counters and keep running", async () => {
    const p = await peer((sock) => sock.write(Buffer.alloc(64, 0x41)));
    const index = await createKvIndex({ maxSlots: 4, capacity: 256 });
    const lines: string[] = [];
    const kv = new ZmqKvEventSubscriber(index, { sockets: zmtpSockets(nodeTcpDialer), reconnectIntervalMs: 5, reconnectMaxIntervalMs: 10, log: (l) => lines.push(l) });
    cleanup.push(() => kv.close());
    await kv.attach({ worker: "w", endpoint: p.endpoint, blockSize: 16 });
    await eventually(() => kv.transport.protocolErrors >= 2, "protocol errors counted");
    expect(kv.counters()).toMatchObject({ connects: 0, socketErrors: 0, batches: 0 });
    expect(kv.transport.lastError).toMatch(/^w rank 0 \(tcp:\/\/127\.0\.0\.1:\d+\): ZMTP bad-signature: peer greeting starts with 0x41, not 0xff$/);
    expect(lines[0]).toMatch(/^KV events of w rank 0 \(tcp:\/\/127\.0\.0\.1:\d+\): ZMTP bad-signature: .*; reconnecting$/);
    await kv.close();
    expect(kv.status()).toEqual([]);
  });
});
