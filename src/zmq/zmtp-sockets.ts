/**
 * @module kvgate's own ZeroMQ SUB and DEALER sockets: ZMTP 3.x over an injected TCP dialer, for Bun (where the native `zeromq`
 * module aborts) and Deno (where it needs --allow-ffi). No maintained pure-JS ZeroMQ-over-TCP client covers Node, Bun
 * and Deno, so this implements just what the KV-event ingest needs, with libzmq's behaviour where it matters:
 * connect reconnects with backoff until closed, bind accepts any number of peers, SUB sends subscriptions as
 * 0x01-prefixed messages (what every ZMTP 3.x publisher, libzmq 4.3 included, accepts) and filters by prefix itself
 * too, and a full receive queue stops reading the sockets (TCP pushes back, the publisher drops at its own
 * high-water mark, the subscriber sees a sequence gap) — nothing is dropped here and memory stays bounded.
 */
import { KvgateError } from "../core/errors.ts";
import { ZmtpConnection, type CommandStats, type ZmtpSocketType } from "./zmtp-connection.ts";
import { ZmtpError, type ZmtpLimits } from "./zmtp-codec.ts";
import { ReceiveQueue } from "./zmtp-queue.ts";
import type { TcpDialer, TcpListener, TcpStream } from "./tcp-dialer.ts";
import type { DealerSocket, DealerSocketOptions, MessageListener, SocketEvents, SubSocket, SubSocketOptions, ZmqSockets } from "./zmq-sockets.ts";

export interface ZmtpOptions extends SocketEvents, Partial<ZmtpLimits> {
  reconnectIntervalMs?: number;
  reconnectMaxIntervalMs?: number;
  /** Messages queued before reading stops. Default 1,000. */
  receiveHighWaterMark?: number;
  /** Bytes queued before reading stops. Default 64 MiB. */
  receiveHighWaterBytes?: number;
  handshakeTimeoutMs?: number;
  /** PING a ZMTP 3.1 peer this often (a silent dead host is then noticed and reconnected); 0 = off. Default 0. */
  heartbeatIntervalMs?: number;
  /** Close when nothing arrived for this long while heartbeating. Default 3 × the interval. */
  heartbeatTimeoutMs?: number;
  maxWriteBufferBytes?: number;
  /** Peers a bound socket accepts at once; more are closed at accept. Default 64. */
  maxConnections?: number;
  /**
   * Connecting sockets read into one reused buffer of this size (the dialer's `readInto`), shared by every socket of the
   * same size in this thread, and decode frames in place; 0 = a fresh chunk per read. Default 4 MiB: an engine batch
   * is ~10 KiB, so almost every frame decodes as a view, and a wake-up takes in what the kernel holds at once (on
   * `bench events`, 4 MiB drained a backlog ~8% faster than 1 MiB and ~20% faster than 256 KiB).
   */
  readBufferBytes?: number;
}

/** Connections, errors and queue state of one socket. */
export interface ZmtpCounters extends CommandStats {
  /** Handshakes completed. */
  connects: number;
  /** Connections lost after their handshake. */
  disconnects: number;
  /** TCP connects that failed (peer not up yet) or dropped before the handshake finished. */
  connectFailures: number;
  /** Connections closed because the peer broke ZMTP (garbage, oversized frames, wrong socket type, …). */
  protocolErrors: number;
  /** Times reading stopped because the receive queue was full. */
  pauses: number;
  /** Messages whose topic matched no subscription (a publisher that does not filter). */
  filtered: number;
  /** Messages whose listener threw (the message is lost to it; reading goes on). */
  listenerErrors: number;
  lastError: string | undefined;
}

interface Target {
  host: string;
  port: number;
}

/** `tcp://host:port` (host may be `[v6]`, port `*` when binding). */
export function parseTcpEndpoint(endpoint: string, binding: boolean): Target {
  const m = /^tcp:\/\/(\[[^\]]+\]|[^:/\s]+):(\d{1,5}|\*)$/.exec(endpoint);
  if (!m) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `ZeroMQ endpoint ${JSON.stringify(endpoint)} is not tcp://host:port (kvgate's ZMTP client speaks TCP only)`);
  const host = m[1]!.replace(/^\[|\]$/g, "");
  if (m[2] === "*" && !binding) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `cannot connect to port * in ${endpoint}`);
  const port = m[2] === "*" ? 0 : Number(m[2]);
  if (port > 65535) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `port out of range in ${endpoint}`);
  if (host === "*" && !binding) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `cannot connect to host * in ${endpoint}`);
  return { host: host === "*" ? "0.0.0.0" : host, port };
}

const closedError = (): KvgateError => new KvgateError("KVGATE_ERR_STATE", "ZeroMQ socket closed");

/**
 * One read buffer per size for the whole thread: a read is decoded to the end before the next one starts (and what a
 * connection keeps is copied), so sockets can take turns in the same memory.
 */
const readBuffers = new Map<number, Uint8Array>();
function sharedReadBuffer(bytes: number): Uint8Array {
  let b = readBuffers.get(bytes);
  if (!b) readBuffers.set(bytes, (b = new Uint8Array(bytes)));
  return b;
}

abstract class ZmtpSocket {
  readonly counters: ZmtpCounters = {
    connects: 0, disconnects: 0, connectFailures: 0, protocolErrors: 0, pauses: 0, filtered: 0, listenerErrors: 0, lastError: undefined,
    pingsAnswered: 0, pongsReceived: 0, pingsSent: 0, unknownCommands: 0,
  };
  /** The last bound endpoint with its real port (after bind to port *). */
  lastEndpoint: string | undefined;
  readonly #connections = new Set<ZmtpConnection>();
  readonly #timers = new Set<ReturnType<typeof setTimeout>>();
  readonly #servers: TcpListener[] = [];
  protected readonly queue: ReceiveQueue;
  /** Set by a SUB socket's listen(): messages skip the queue. */
  protected listener: MessageListener | undefined;
  #closed = false;
  #onClosed: (() => void)[] = [];

  constructor(readonly type: ZmtpSocketType, private readonly dialer: TcpDialer, readonly options: ZmtpOptions) {
    this.queue = new ReceiveQueue(options.receiveHighWaterMark ?? 1_000, options.receiveHighWaterBytes ?? 64 * 1024 * 1024,
      () => this.#resumeAll());
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** What the receive queue holds now. */
  get queued(): { messages: number; bytes: number } {
    return { messages: this.queue.length, bytes: this.queue.bytes };
  }

  /** Connections whose handshake is done. */
  protected ready(): ZmtpConnection[] {
    return [...this.#connections].filter((c) => c.ready);
  }

  connect(endpoint: string): void {
    if (this.#closed) throw closedError();
    const target = parseTcpEndpoint(endpoint, false);
    const base = this.options.reconnectIntervalMs ?? 100;
    const max = Math.max(base, this.options.reconnectMaxIntervalMs ?? 5_000);
    let wait = base;
    const dial = (): void => {
      if (this.#closed) return;
      const bytes = this.options.readBufferBytes ?? 4 * 1024 * 1024;
      let conn: ZmtpConnection | undefined;
      const sock = this.dialer.connect(target.host, target.port, bytes > 0
        ? { buffer: sharedReadBuffer(bytes), onRead: (n, buf) => (conn ? conn.read(buf.subarray(0, n)) : false) }
        : undefined);
      conn = this.#open(sock, (up, error) => {
        if (this.#closed) return;
        // Back to the first interval after a connection that worked; a peer breaking ZMTP keeps backing off.
        if (up && !(error instanceof ZmtpError)) wait = base;
        const t = setTimeout(() => {
          this.#timers.delete(t);
          dial();
        }, wait);
        this.#timers.add(t);
        wait = Math.min(max, wait * 2);
      });
    };
    dial();
  }

  async bind(endpoint: string): Promise<void> {
    if (this.#closed) throw closedError();
    const target = parseTcpEndpoint(endpoint, true);
    const max = this.options.maxConnections ?? 64;
    let open = 0;
    const server = await this.dialer.listen(target.host, target.port, (sock) => {
      // Anyone can connect to a bound port: each connection may buffer up to a message, so their number is capped.
      if (this.#closed || open >= max) {
        if (!this.#closed) this.counters.connectFailures++;
        sock.destroy();
        return;
      }
      open++;
      this.#open(sock, () => void open--);
    }, (e) => void (this.counters.lastError = e.message));
    // A socket closed while binding must not keep listening.
    if (this.#closed) {
      server.close();
      throw closedError();
    }
    this.#servers.push(server);
    this.lastEndpoint = endpoint.replace(/:(\d+|\*)$/, `:${server.port}`);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    for (const s of this.#servers) s.close();
    for (const c of [...this.#connections]) c.close();
    this.queue.close(closedError());
    for (const f of this.#onClosed.splice(0)) f();
  }

  /** Hands a message to a listener; a listener that throws loses that message only. */
  protected deliver(listener: MessageListener, frames: readonly Uint8Array[]): void {
    try {
      listener(frames);
    } catch (e) {
      this.counters.listenerErrors++;
      this.counters.lastError = e instanceof Error ? e.message : String(e);
    }
  }

  /** Resolves once the socket is closed. */
  protected whenClosed(): Promise<void> {
    return this.#closed ? Promise.resolve() : new Promise((r) => this.#onClosed.push(r));
  }

  /** Sent on every new connection once it is ready (SUB: the subscriptions). */
  protected abstract greet(c: ZmtpConnection): void;

  /** Whether a message from a peer is kept (SUB: topic filter). */
  protected abstract accepts(frames: Uint8Array[]): boolean;

  #open(sock: TcpStream, onGone: (up: boolean, error: Error | undefined) => void): ZmtpConnection {
    const o = this.options;
    const interval = o.heartbeatIntervalMs ?? 0;
    let up = false;
    const conn = new ZmtpConnection(sock, {
      socketType: this.type,
      limits: { maxMessageBytes: o.maxMessageBytes ?? 64 * 1024 * 1024, maxFrames: o.maxFrames ?? 64, maxCommandBytes: o.maxCommandBytes ?? 64 * 1024 },
      handshakeTimeoutMs: o.handshakeTimeoutMs ?? 30_000,
      heartbeatIntervalMs: interval,
      heartbeatTimeoutMs: o.heartbeatTimeoutMs ?? interval * 3,
      maxWriteBufferBytes: o.maxWriteBufferBytes ?? 1024 * 1024,
    }, {
      ready: (c) => {
        up = true;
        this.counters.connects++;
        this.greet(c);
        o.onConnect?.();
      },
      message: (c, frames) => {
        if (!this.accepts(frames)) {
          this.counters.filtered++;
          return true;
        }
        if (this.listener) {
          this.deliver(this.listener, frames);
          return true;
        }
        // Queued past this call: the frames may view the read buffer.
        if (this.queue.push(frames.map((f) => f.slice()))) return true;
        this.counters.pauses++;
        return false;
      },
      closed: (c, error) => {
        this.#connections.delete(c);
        if (up) {
          this.counters.disconnects++;
          o.onDisconnect?.();
        } else this.counters.connectFailures++;
        if (error instanceof ZmtpError) {
          this.counters.protocolErrors++;
          this.counters.lastError = error.message;
          o.onError?.(error);
        } else if (error) this.counters.lastError = error.message;
        onGone(up, error);
      },
    }, this.counters);
    this.#connections.add(conn);
    return conn;
  }

  #resumeAll(): void {
    for (const c of this.#connections) c.resume();
  }
}

class ZmtpSubscriber extends ZmtpSocket implements SubSocket {
  readonly #topics: Uint8Array[] = [];
  /** Subscribed to "" (every message): no topic to compare per message. */
  #all = false;

  constructor(dialer: TcpDialer, options: ZmtpOptions) {
    super("SUB", dialer, options);
  }

  subscribe(prefix: string): void {
    const topic = new TextEncoder().encode(prefix);
    this.#topics.push(topic);
    if (topic.length === 0) this.#all = true;
    for (const c of this.ready()) this.#sendSubscription(c, topic);
  }

  /**
   * Hands every message to `listener` as it is decoded, synchronously, instead of queueing it for the iterator (no
   * copy, no promise per message; reading is paced by the listener itself). Messages already queued go first. Resolves
   * once the socket is closed.
   */
  listen(listener: MessageListener): Promise<void> {
    if (this.listener) throw new KvgateError("KVGATE_ERR_STATE", "this ZeroMQ socket already has a listener");
    for (let m = this.queue.takeNow(); m; m = this.queue.takeNow()) this.deliver(listener, m);
    this.listener = listener;
    return this.whenClosed();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array[]> {
    for (;;) {
      let frames: Uint8Array[];
      try {
        frames = await this.queue.shift();
      } catch (e) {
        if (this.closed) return;
        throw e;
      }
      yield frames;
    }
  }

  protected greet(c: ZmtpConnection): void {
    for (const t of this.#topics) this.#sendSubscription(c, t);
  }

  protected accepts(frames: Uint8Array[]): boolean {
    if (this.#all) return true;
    const first = frames[0]!;
    return this.#topics.some((t) => t.length <= first.length && t.every((b, i) => first[i] === b));
  }

  #sendSubscription(c: ZmtpConnection, topic: Uint8Array): void {
    const msg = new Uint8Array(topic.length + 1);
    msg[0] = 1;
    msg.set(topic, 1);
    c.send([msg]);
  }
}

class ZmtpDealer extends ZmtpSocket implements DealerSocket {
  #next = 0;
  readonly #waiting = new Set<() => void>();

  constructor(readonly timeoutMs: number, dialer: TcpDialer, options: ZmtpOptions) {
    super("DEALER", dialer, options);
  }

  /** Round-robin over ready peers, waiting up to the timeout for one (libzmq's DEALER blocks the same way). */
  async send(frames: Uint8Array[]): Promise<void> {
    const deadline = Date.now() + this.timeoutMs;
    for (;;) {
      if (this.closed) throw closedError();
      const peers = this.ready();
      if (peers.length > 0 && peers[this.#next++ % peers.length]!.send(frames)) return;
      const left = deadline - Date.now();
      if (left <= 0) throw new KvgateError("KVGATE_ERR_UPSTREAM_TIMEOUT", `no ZeroMQ peer to send to within ${this.timeoutMs} ms`);
      // Woken by a handshake (greet) or close; the short timer also covers a ready peer whose write was refused.
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(t);
          this.#waiting.delete(done);
          resolve();
        };
        const t = setTimeout(done, Math.min(left, 50));
        this.#waiting.add(done);
      });
    }
  }

  receive(): Promise<Uint8Array[]> {
    return this.queue.shift(this.timeoutMs);
  }

  override close(): void {
    super.close();
    this.#wake();
  }

  protected greet(): void {
    this.#wake();
  }

  protected accepts(): boolean {
    return true;
  }

  #wake(): void {
    for (const w of [...this.#waiting]) w();
    this.#waiting.clear();
  }
}

/** What a ZMTP socket shows besides the interface: counters, the bound endpoint, the receive queue. */
export interface ZmtpSocketState {
  readonly counters: ZmtpCounters;
  readonly lastEndpoint: string | undefined;
  readonly queued: { messages: number; bytes: number };
}

/** A SUB socket of kvgate's ZMTP client. */
export function zmtpSubscriber(dialer: TcpDialer, options: ZmtpOptions = {}): SubSocket & ZmtpSocketState & { listen(listener: MessageListener): Promise<void> } {
  return new ZmtpSubscriber(dialer, options);
}

/** A DEALER socket of kvgate's ZMTP client; `timeoutMs` bounds each send and receive. */
export function zmtpDealer(dialer: TcpDialer, timeoutMs: number, options: ZmtpOptions = {}): DealerSocket & ZmtpSocketState {
  return new ZmtpDealer(timeoutMs, dialer, options);
}

/** kvgate's ZMTP client behind the socket interface, with defaults for engine KV events. */
export function zmtpSockets(dialer: TcpDialer, defaults: ZmtpOptions = {}): ZmqSockets {
  return {
    name: "zmtp",
    subscriber: (o: SubSocketOptions) => zmtpSubscriber(dialer, { ...defaults, ...definedOnly(o) }),
    dealer: (o: DealerSocketOptions) => zmtpDealer(dialer, o.timeoutMs, { ...defaults, ...definedOnly(o) }),
  };
}

/**
 * kvgate's ZMTP client as it faces engines (the gateway's subscriber, the bridge). Heartbeats on: a publisher host
 * that vanished without closing TCP is noticed within 30 s and redialled (libzmq answers PINGs whatever its options).
 */
export function engineZmtpSockets(dialer: TcpDialer): ZmqSockets {
  return zmtpSockets(dialer, { heartbeatIntervalMs: 10_000, heartbeatTimeoutMs: 30_000 });
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
