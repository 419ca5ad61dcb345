/**
 * @module The SyncBus of router replicas on Node: @nats-io/transport-node and JetStream. Connects in the background,
 * reconnects forever, keeps subscriptions and the stream's ordered consumer across outages.
 */
import type { StreamStart, SyncBus, SyncBusFactory, SyncBusOptions, SyncKv, SyncKvOptions, SyncMessage, SyncObjects } from "../../replicas/sync-bus.ts";
import { natsJetstream, natsTransport } from "./nats-modules.ts";
import { natsKv, natsObjects, type ConnSource } from "./nats-state.ts";

type Nats = typeof import("@nats-io/transport-node");
type Conn = Awaited<ReturnType<Nats["connect"]>>;
type MsgLike = { subject: string; data: Uint8Array; seq?: number; headers?: { get(k: string): string } };

/** Bytes published while disconnected that the client may hold for the reconnect; more are dropped. */
const OUTAGE_BUFFER_BYTES = 8 << 20;

const asMessage = (m: MsgLike): SyncMessage => ({ subject: m.subject, data: m.data, seq: m.seq, header: (k) => m.headers?.get(k) || undefined });
const asStreamMessage = (m: MsgLike & { info: { pending: number }; timestampNanos: bigint }): SyncMessage => ({
  ...asMessage(m), streamPending: m.info.pending, storedAtMs: Number(m.timestampNanos / 1_000_000n),
});

class NatsBus implements SyncBus {
  #nc: Conn | undefined;
  #nats: Nats | undefined;
  #connected = false;
  #closed = false;
  #buffered = 0;
  #outbox: [string, Uint8Array, Readonly<Record<string, string>> | undefined][] = [];
  readonly #subs: [string, (m: SyncMessage) => void][] = [];
  #stream: ((m: SyncMessage) => void) | undefined;
  #from: StreamStart = {};
  /** Stream batches not yet acknowledged, oldest first, and their bytes (bounded like the outage buffer). */
  readonly #streamQueue: { subject: string; data: Uint8Array; headers?: Readonly<Record<string, string>>; msgID: string }[] = [];
  #streamBytes = 0;
  #pumping = false;
  /** The JetStream client of the current connection (made once per connection, not per batch). */
  #js: { nc: Conn; js: ReturnType<typeof import("@nats-io/jetstream").jetstream> } | undefined;
  #nextMsg = 0;
  /** Message ids unique to this process, so the stream's duplicate window drops only true retries. */
  readonly #publisherId = `${Date.now().toString(36)}${Math.floor(Math.random() * 2 ** 32).toString(36)}`;
  readonly #streamPrefix: string;
  /** The running ordered consumer's messages, stopped on a reconnect so the loop starts a fresh one after `last`. */
  #messages: { stop(): void } | undefined;
  readonly #listeners: ((up: boolean) => void)[] = [];
  readonly #ready: Promise<void>;

  constructor(private readonly o: SyncBusOptions) {
    this.#streamPrefix = o.streamSubjects.replace(/>$/, "");
    this.#ready = this.#start().catch((e: unknown) => {
      if (!this.#closed) o.log(`NATS ${o.servers}: ${(e as Error).message}`);
    });
  }

  get connected(): boolean {
    return this.#connected;
  }

  publish(subject: string, data: Uint8Array, headers?: Readonly<Record<string, string>>): boolean {
    if (this.#closed || !this.#nats) return false;
    if (subject.startsWith(this.#streamPrefix)) return this.#enqueueStream(subject, data, headers);
    if (!this.#connected || !this.#nc) return this.#hold(subject, data, headers);
    try {
      this.#send(this.#nc, subject, data, headers);
    } catch {
      // The client refuses while the connection is going down, before the disconnect is reported: a KV batch lost
      // here would be a gap in the stream no peer can fill, so it and all after it wait until the stream answers.
      const held = this.#hold(subject, data, headers);
      this.#setConnected(false);
      void this.#reconnected(this.#nc);
      return held;
    }
    return true;
  }

  /**
   * A stream batch waits in order for JetStream's acknowledgement: a plain publish is at most once, and a batch lost
   * on the wire as the server dies is a gap no peer can fill. One in flight at a time keeps the stream's order; a
   * retried batch carries the same message id, so the stream drops a copy it already stored.
   */
  #enqueueStream(subject: string, data: Uint8Array, headers?: Readonly<Record<string, string>>): boolean {
    if (this.#streamBytes + data.length > OUTAGE_BUFFER_BYTES) return false;
    this.#streamBytes += data.length;
    this.#streamQueue.push({ subject, data, headers, msgID: `${this.#publisherId}-${this.#nextMsg++}` });
    void this.#pumpStream();
    return true;
  }

  async #pumpStream(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      const { jetstream } = await natsJetstream();
      while (!this.#closed && this.#streamQueue.length > 0) {
        const nc = this.#nc;
        if (!this.#connected || !nc) {
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        const m = this.#streamQueue[0]!;
        let h: ReturnType<Nats["headers"]> | undefined;
        if (m.headers) {
          h = this.#nats!.headers();
          for (const [k, v] of Object.entries(m.headers)) h.set(k, v);
        }
        try {
          if (this.#js?.nc !== nc) this.#js = { nc, js: jetstream(nc) };
          await this.#js.js.publish(m.subject, m.data, { msgID: m.msgID, timeout: 2_000, ...(h ? { headers: h } : {}) });
          this.#streamQueue.shift();
          this.#streamBytes -= m.data.length;
        } catch {
          // Not acknowledged (server gone, stream not loaded yet, timeout): the same batch again, shortly.
          await new Promise((r) => setTimeout(r, 250));
        }
      }
    } finally {
      this.#pumping = false;
    }
  }

  /** Held in order until NATS is back and the stream is there again (a restarted server loads it before it stores). */
  #hold(subject: string, data: Uint8Array, headers?: Readonly<Record<string, string>>): boolean {
    if (this.#buffered + data.length > OUTAGE_BUFFER_BYTES) return false;
    this.#buffered += data.length;
    this.#outbox.push([subject, data, headers]);
    return true;
  }

  #send(nc: Conn, subject: string, data: Uint8Array, headers?: Readonly<Record<string, string>>): void {
    let h: ReturnType<Nats["headers"]> | undefined;
    if (headers) {
      h = this.#nats!.headers();
      for (const [k, v] of Object.entries(headers)) h.set(k, v);
    }
    nc.publish(subject, data, h ? { headers: h } : undefined);
  }

  subscribe(subject: string, onMessage: (m: SyncMessage) => void): void {
    this.#subs.push([subject, onMessage]);
    if (this.#nc) this.#subscribeNow(this.#nc, subject, onMessage);
  }

  consumeStream(onMessage: (m: SyncMessage) => void, start: StreamStart = {}): void {
    this.#stream = onMessage;
    this.#from = start;
  }

  kv(bucket: string, options: SyncKvOptions): SyncKv {
    return natsKv(this.#source, bucket, options);
  }

  objects(bucket: string, options: { maxBytes: number }): SyncObjects {
    return natsObjects(this.#source, bucket, options);
  }

  readonly #source: ConnSource = ((bus: NatsBus): ConnSource => ({
    up: async () => {
      while (!bus.#closed) {
        if (bus.#connected && bus.#nc) return bus.#nc;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error("the NATS connection was closed");
    },
    current: () => (bus.#connected && !bus.#closed ? bus.#nc : undefined),
    get closed() {
      return bus.#closed;
    },
    log: (line) => bus.o.log(line),
  }))(this);

  onStatus(listener: (connected: boolean) => void): void {
    this.#listeners.push(listener);
  }

  async close(): Promise<void> {
    this.#closed = true;
    const nc = this.#nc;
    if (nc && !nc.isClosed()) await nc.close().catch(() => {});
    await this.#ready;
  }

  #setConnected(up: boolean): void {
    if (this.#connected === up) return;
    this.#connected = up;
    if (up && this.#nc) {
      const held = this.#outbox;
      this.#outbox = [];
      this.#buffered = 0;
      for (let i = 0; i < held.length; i++) {
        try {
          this.#send(this.#nc, ...held[i]!);
        } catch {
          // Down again while flushing: the rest waits, in order, for the next time the stream answers.
          for (const [s, d, h] of held.slice(i)) this.#hold(s, d, h);
          this.#connected = false;
          void this.#reconnected(this.#nc);
          return;
        }
      }
    }
    for (const l of this.#listeners) l(up);
  }

  /** Back from an outage: connected again once the stream answers, so held batches land in it. */
  async #reconnected(nc: Conn): Promise<void> {
    while (!this.#closed && !nc.isClosed() && !this.#connected) {
      try {
        await this.#ensureStream(nc);
        this.#setConnected(true);
        // The server may have lost the ephemeral consumer; the client would notice only after missed idle heartbeats
        // (tens of seconds), so start a new one from the last sequence seen now.
        this.#messages?.stop();
      } catch {
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  async #start(): Promise<void> {
    const nats = (this.#nats = await natsTransport());
    const nc = await nats.connect({
      servers: this.o.servers.split(",").map((s) => s.trim()).filter((s) => s.length > 0), name: this.o.name,
      waitOnFirstConnect: true, maxReconnectAttempts: -1, reconnectTimeWait: 250, pingInterval: 2_000, maxPingOut: 2,
      // This replica's own bookings and decisions are not sent back to it (it would only decode and drop them);
      // JetStream deliveries come from the server, so its own KV batches are still read back (warm restarts need them).
      noEcho: true,
      // Otherwise every request (each JetStream publish waits for its ack through one) captures a stack trace for
      // a possible timeout: an Error built, and under source maps the maps parsed, ~35 µs of a routed request's CPU.
      noAsyncTraces: true,
    });
    // The stream exists before the first publish, so no KV batch published on connecting is missed by it.
    while (!this.#closed) {
      try {
        await this.#ensureStream(nc);
        break;
      } catch (e) {
        this.o.log(`NATS stream ${this.o.stream}: ${(e as Error).message}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    if (this.#closed) return void (await nc.close());
    this.#nc = nc;
    for (const [s, cb] of this.#subs) this.#subscribeNow(nc, s, cb);
    this.#setConnected(true);
    void this.#watch(nc);
    await this.#consume(nc);
  }

  #subscribeNow(nc: Conn, subject: string, cb: (m: SyncMessage) => void): void {
    nc.subscribe(subject, { callback: (err, m) => {
      if (!err) cb(asMessage(m));
    } });
  }

  async #watch(nc: Conn): Promise<void> {
    for await (const s of nc.status()) {
      if (s.type === "disconnect") this.#setConnected(false);
      else if (s.type === "reconnect") void this.#reconnected(nc);
    }
    this.#setConnected(false);
  }

  async #ensureStream(nc: Conn): Promise<void> {
    const { jetstreamManager, DiscardPolicy, RetentionPolicy, StorageType } = await natsJetstream();
    const jsm = await jetstreamManager(nc);
    const cfg = {
      name: this.o.stream, subjects: [this.o.streamSubjects], retention: RetentionPolicy.Limits, storage: StorageType.File,
      discard: DiscardPolicy.Old, max_msgs: this.o.streamMaxMsgs, max_age: this.#nats!.nanos(this.o.streamMaxAgeMs),
    };
    try {
      await jsm.streams.info(this.o.stream);
      await jsm.streams.update(this.o.stream, { max_msgs: cfg.max_msgs, max_age: cfg.max_age, subjects: cfg.subjects });
    } catch (e) {
      if ((e as { name?: string }).name !== "StreamNotFoundError" && !/not found/i.test((e as Error).message)) throw e;
      await jsm.streams.add(cfg);
    }
  }

  /** The ordered consumer, restarted after the last stream sequence seen whenever it ends (server restart, lost consumer). */
  async #consume(nc: Conn): Promise<void> {
    const { jetstream, DeliverPolicy } = await natsJetstream();
    const js = jetstream(nc);
    let last = 0;
    if (this.#from.coveredSeq) {
      try {
        last = Math.max(0, await this.#from.coveredSeq());
      } catch (e) {
        this.o.log(`NATS stream ${this.o.stream}: where to start: ${(e as Error).message}; reading it from its start`);
      }
    }
    while (!this.#closed && !nc.isClosed()) {
      try {
        await this.#ensureStream(nc);
        const c = await js.consumers.get(this.o.stream, last === 0 ? { deliver_policy: DeliverPolicy.All }
          : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: last + 1 });
        // Short pulls: a server that vanished without a disconnect is noticed by the idle heartbeats in seconds.
        const it = await c.consume({ expires: 5_000 });
        this.#messages = it;
        for await (const m of it) {
          last = m.seq;
          this.#stream?.(asStreamMessage(m));
        }
      } catch (e) {
        if (!this.#closed && this.#connected) this.o.log(`NATS stream ${this.o.stream}: ${(e as Error).message}`);
      }
      this.#messages = undefined;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

export const natsBus: SyncBusFactory = (options) => new NatsBus(options);
