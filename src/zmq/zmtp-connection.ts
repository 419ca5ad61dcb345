/**
 * @module One ZMTP 3.x session over a TCP stream (tcp-dialer.ts; docs/zmtp.md): greeting, NULL
 * handshake with READY (our Socket-Type out, the peer's checked), multipart messages in, PINGs answered, optional
 * heartbeats out, and reading paused while the owner's queue is full. Whatever the peer sends, the worst outcome is
 * this connection closing with a ZmtpError; nothing is buffered beyond the decoder's limits.
 */
import {
  asciiBytes, bytesToLatin1, encodeCommand, encodeFrames, encodeGreeting, encodeReady, MAX_PING_CONTEXT, parseCommand,
  parseMetadata, ZmtpDecoder, ZmtpError, type PeerGreeting, type ZmtpLimits,
} from "./zmtp-codec.ts";
import type { TcpStream } from "./tcp-dialer.ts";

export type ZmtpSocketType = "SUB" | "DEALER";

/** Who may talk to whom (RFC 23 / libzmq's compatibility table), for the socket types kvgate opens. */
export const COMPATIBLE_PEERS: Readonly<Record<ZmtpSocketType, readonly string[]>> = {
  SUB: ["PUB", "XPUB"],
  DEALER: ["ROUTER", "DEALER", "REP"],
};

export interface ZmtpConnectionOptions {
  socketType: ZmtpSocketType;
  limits: ZmtpLimits;
  /** The peer must finish greeting and READY within this long (libzmq's ZMQ_HANDSHAKE_IVL, default 30 s). */
  handshakeTimeoutMs: number;
  /** Send a PING this often to a ZMTP 3.1 peer and close when nothing arrived for `heartbeatTimeoutMs`; 0 = off. */
  heartbeatIntervalMs: number;
  heartbeatTimeoutMs: number;
  /** A peer that does not read what we write (PONGs, subscriptions) is closed past this many unsent bytes. */
  maxWriteBufferBytes: number;
}

export interface ZmtpConnectionHandlers {
  ready(c: ZmtpConnection): void;
  /**
   * A complete message; returns false to stop reading until resume(). The frames may view the read chunk: they are
   * valid during the call only, so a handler that keeps a message copies it.
   */
  message(c: ZmtpConnection, frames: Uint8Array[]): boolean;
  /** Once, when the connection is gone; `error` unset for a clean close by either side. */
  closed(c: ZmtpConnection, error: Error | undefined): void;
}

/** Heartbeat and command traffic, for diagnostics and tests. */
export interface CommandStats {
  pingsAnswered: number;
  pongsReceived: number;
  pingsSent: number;
 /** Commands kvgate does not use (SUBSCRIBE/CANCEL, newer ones), ignored. */
  unknownCommands: number;
}

type Phase = "greeting" | "handshake" | "ready" | "closed";

export class ZmtpConnection {
  #phase: Phase = "greeting";
  #peer: PeerGreeting | undefined;
  #frames: Uint8Array[] = [];
  /** How many of #frames are copies already (the rest may view the read chunk). */
  #owned = 0;
  #stopped = false;
  #error: Error | undefined;
  #lastReceived = Date.now();
  #handshakeTimer: ReturnType<typeof setTimeout> | undefined;
  #heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  readonly #decoder: ZmtpDecoder;

  /** `stats` is the owning socket's, shared by its connections. */
  constructor(readonly socket: TcpStream, readonly options: ZmtpConnectionOptions, private readonly handlers: ZmtpConnectionHandlers,
    readonly stats: CommandStats = { pingsAnswered: 0, pongsReceived: 0, pingsSent: 0, unknownCommands: 0 }) {
    this.#decoder = new ZmtpDecoder(options.limits);
    socket.setNoDelay(true);
    // A socket opened with `onread` emits no "data": its owner hands each read to read() instead.
    socket.on("data", (chunk: Uint8Array) => this.read(chunk));
    socket.on("error", (e: Error) => void (this.#error ??= e));
    socket.on("close", () => this.#finish());
    this.#handshakeTimer = setTimeout(() => this.#fail(socket.connecting
      // A host that never answers the TCP connect is unreachable, not a peer breaking ZMTP.
      ? new Error(`TCP connect not done within ${options.handshakeTimeoutMs} ms`)
      : new ZmtpError("handshake-timeout", `no greeting and READY within ${options.handshakeTimeoutMs} ms`)), options.handshakeTimeoutMs);
    this.#write(encodeGreeting(1));
  }

  get ready(): boolean {
    return this.#phase === "ready";
  }

  get closed(): boolean {
    return this.#phase === "closed";
  }

  /** Sends one multipart message; false when the connection is not (or no longer) ready. */
  send(frames: readonly Uint8Array[]): boolean {
    if (this.#phase !== "ready") return false;
    return this.#write(encodeFrames(frames));
  }

  /** Reading resumes after the owner made room. */
  resume(): void {
    if (!this.#stopped || this.#phase === "closed") return;
    this.#stopped = false;
    // Time spent paused by our own backpressure is not the peer's silence.
    this.#lastReceived = Date.now();
    this.#pump();
    if (!this.#stopped && !this.closed) this.socket.resume();
  }

  /** Closes the connection; with an error, the owner counts it. */
  close(error?: Error): void {
    if (this.#phase === "closed") return;
    if (error) this.#error ??= error;
    this.socket.destroy();
    // destroy() emits "close" asynchronously; finish now so the owner sees the connection gone at once.
    this.#finish();
  }

  #fail(e: Error): void {
    this.close(e);
  }

  /**
   * Bytes read from the socket. `chunk` may be a reused read buffer: when this returns, nothing refers to it any more
   * (undecoded bytes and the frames of an unfinished message are copied). Returns false while reading is stopped.
   */
  read(chunk: Uint8Array): boolean {
    if (this.#phase === "closed") return false;
    this.#lastReceived = Date.now();
    this.#decoder.push(chunk);
    this.#pump();
    this.#decoder.release();
    const f = this.#frames;
    for (; this.#owned < f.length; this.#owned++) f[this.#owned] = f[this.#owned]!.slice();
    return !this.#stopped;
  }

  /** Decodes what is buffered until it runs out, the owner's queue is full, or the connection fails. */
  #pump(): void {
    try {
      while (!this.#stopped && this.#phase !== "closed") {
        if (this.#phase === "greeting") {
          const g = this.#decoder.greeting();
          if (!g) return;
          this.#peer = g;
          this.#phase = "handshake";
          this.#write(encodeReady(this.#readyProperties()));
          continue;
        }
        const f = this.#decoder.next();
        if (!f) return;
        if (f.command) this.#command(f.body);
        else this.#frame(f.body, f.more);
      }
    } catch (e) {
      this.#fail(e instanceof Error ? e : new Error(String(e)));
    }
  }

  #readyProperties(): Record<string, Uint8Array> {
    const props: Record<string, Uint8Array> = { "Socket-Type": asciiBytes(this.options.socketType) };
    // libzmq sends an Identity for DEALER (empty: the ROUTER assigns one).
    if (this.options.socketType === "DEALER") props.Identity = new Uint8Array(0);
    return props;
  }

  #frame(body: Uint8Array, more: boolean): void {
    if (this.#phase !== "ready") throw new ZmtpError("unexpected-message", "peer sent a message before its READY");
    this.#frames.push(body);
    if (more) return;
    const frames = this.#frames;
    this.#frames = [];
    this.#owned = 0;
    if (!this.handlers.message(this, frames)) {
      this.#stopped = true;
      this.socket.pause();
    }
  }

  #command(body: Uint8Array): void {
    const { name, data } = parseCommand(body);
    switch (name) {
      case "READY":
        if (this.#phase !== "handshake") throw new ZmtpError("bad-command", "peer sent READY twice");
        this.#onReady(data);
        return;
      case "ERROR": {
        const n = data[0] ?? 0;
        throw new ZmtpError("peer-error", `peer sent ERROR ${JSON.stringify(bytesToLatin1(data.subarray(1, 1 + n)))}`);
      }
      case "PING": {
        if (data.length < 2 || data.length - 2 > MAX_PING_CONTEXT) throw new ZmtpError("bad-command", `PING of ${data.length} bytes`);
        this.stats.pingsAnswered++;
        this.#write(encodeCommand("PONG", data.subarray(2)));
        return;
      }
      case "PONG":
        this.stats.pongsReceived++;
        return;
      default:
        if (this.#phase !== "ready") throw new ZmtpError("bad-command", `peer sent ${JSON.stringify(name)} before READY`);
        // SUBSCRIBE/CANCEL are for publishers; anything newer is ignored as RFC 37 allows.
        this.stats.unknownCommands++;
    }
  }

  #onReady(data: Uint8Array): void {
    const props = parseMetadata(data);
    const type = props.get("socket-type");
    if (!type) throw new ZmtpError("bad-ready", "peer READY has no Socket-Type");
    const peerType = bytesToLatin1(type);
    const allowed = COMPATIBLE_PEERS[this.options.socketType];
    if (!allowed.includes(peerType)) {
      // Tell the peer why, as libzmq does, then close.
      this.#write(encodeCommand("ERROR", errorReason("Invalid socket type")));
      throw new ZmtpError("incompatible-peer", `a ${this.options.socketType} socket cannot talk to a ${peerType} (needs ${allowed.join(" or ")})`);
    }
    this.#phase = "ready";
    clearTimeout(this.#handshakeTimer);
    this.#handshakeTimer = undefined;
    const o = this.options;
    if (o.heartbeatIntervalMs > 0 && this.#peer!.minor >= 1) {
      this.#heartbeatTimer = setInterval(() => this.#heartbeat(), o.heartbeatIntervalMs);
    }
    this.handlers.ready(this);
  }

  #heartbeat(): void {
    if (this.#phase !== "ready") return;
    if (this.#stopped) {
      this.#lastReceived = Date.now();
      return;
    }
    const o = this.options;
    if (Date.now() - this.#lastReceived > o.heartbeatTimeoutMs) {
      this.#fail(new ZmtpError("heartbeat-timeout", `nothing from the peer for over ${o.heartbeatTimeoutMs} ms`));
      return;
    }
    // TTL (deciseconds): the peer may drop us if it hears nothing for that long.
    const ttl = new Uint8Array(2);
    new DataView(ttl.buffer).setUint16(0, Math.min(0xffff, Math.ceil(o.heartbeatTimeoutMs / 100)));
    this.stats.pingsSent++;
    this.#write(encodeCommand("PING", ttl));
  }

  #write(bytes: Uint8Array): boolean {
    if (this.#phase === "closed") return false;
    if (this.socket.writableLength + bytes.length > this.options.maxWriteBufferBytes) {
      this.#fail(new ZmtpError("peer-not-reading", `over ${this.options.maxWriteBufferBytes} bytes unsent`));
      return false;
    }
    this.socket.write(bytes);
    return true;
  }

  #finish(): void {
    if (this.#phase === "closed") return;
    this.#phase = "closed";
    clearTimeout(this.#handshakeTimer);
    clearInterval(this.#heartbeatTimer);
    this.#frames = [];
    this.#owned = 0;
    this.handlers.closed(this, this.#error);
  }
}

function errorReason(text: string): Uint8Array {
  const t = asciiBytes(text);
  const out = new Uint8Array(1 + t.length);
  out[0] = t.length;
  out.set(t, 1);
  return out;
}
