/**
 * @module The ZMTP 3.x wire format (RFC 23/ZMTP 3.0, RFC 37/ZMTP 3.1) for kvgate's own ZeroMQ client: the 64-byte
 * greeting, frames (short and long, MORE, COMMAND), READY metadata, PING/PONG and ERROR, and an incremental decoder
 * that checks every length against a limit before it allocates, so a hostile peer cannot make it buffer more than
 * the configured maximum. No sockets here (see zmtp-connection.ts).
 */
import { KvgateError } from "../core/errors.ts";

export const GREETING_SIZE = 64;
export const FLAG_MORE = 0x01;
export const FLAG_LONG = 0x02;
export const FLAG_COMMAND = 0x04;
/** RFC 37: a PING context is 0 to 16 octets. */
export const MAX_PING_CONTEXT = 16;

/** Why a connection was refused or closed: stable strings for logs, tests and counters. */
export type ZmtpErrorReason =
  | "bad-signature" | "bad-version" | "bad-mechanism" | "bad-frame" | "frame-too-large" | "too-many-frames"
  | "bad-command" | "bad-ready" | "incompatible-peer" | "unexpected-message" | "peer-error"
  | "handshake-timeout" | "heartbeat-timeout" | "peer-not-reading";

/** The peer broke ZMTP (or went silent): the connection is closed, the socket reconnects. */
export class ZmtpError extends KvgateError {
  constructor(readonly reason: ZmtpErrorReason, message: string) {
    super("KVGATE_ERR_UPSTREAM", `ZMTP ${reason}: ${message}`, { reason });
    this.name = "ZmtpError";
  }
}

const ascii = (s: string): Uint8Array => new TextEncoder().encode(s);
const latin1 = (b: Uint8Array): string => String.fromCharCode(...b);

/** Our greeting: ZMTP 3.1, NULL mechanism, as-server 0 (NULL has no client/server roles). */
export function encodeGreeting(minor = 1): Uint8Array {
  const g = new Uint8Array(GREETING_SIZE);
  g[0] = 0xff;
  // Byte 8 is libzmq's ZMTP 1.0 compatibility length (identity size + 1); padding is not significant in ZMTP 3.
  g[8] = 0x01;
  g[9] = 0x7f;
  g[10] = 3;
  g[11] = minor;
  g.set(ascii("NULL"), 12);
  return g;
}

export interface PeerGreeting {
  major: number;
  minor: number;
  mechanism: string;
}

/** Checks the signature as soon as its bytes arrive, so a non-ZMTP peer (an HTTP server, garbage) fails fast. */
export function checkSignaturePrefix(bytes: Uint8Array, n: number): void {
  if (n >= 1 && bytes[0] !== 0xff) throw new ZmtpError("bad-signature", `peer greeting starts with 0x${bytes[0]!.toString(16)}, not 0xff`);
  if (n >= 10 && bytes[9] !== 0x7f) throw new ZmtpError("bad-signature", `peer greeting byte 9 is 0x${bytes[9]!.toString(16)}, not 0x7f`);
  if (n >= 11 && bytes[10]! < 3) throw new ZmtpError("bad-version", `peer speaks ZMTP major version ${bytes[10]}; kvgate needs 3.x (libzmq >= 4)`);
}

export function parseGreeting(g: Uint8Array): PeerGreeting {
  checkSignaturePrefix(g, GREETING_SIZE);
  const mech = g.subarray(12, 32);
  const end = mech.indexOf(0);
  const mechanism = latin1(end < 0 ? mech : mech.subarray(0, end));
  if (mechanism !== "NULL" || (end >= 0 && mech.subarray(end).some((b) => b !== 0))) {
    throw new ZmtpError("bad-mechanism", `peer uses security mechanism ${JSON.stringify(mechanism)}; kvgate speaks NULL only`);
  }
  return { major: g[10]!, minor: g[11]!, mechanism };
}

/** One frame on the wire: header (flags, 1- or 8-byte size) then body. */
export function encodeFrames(bodies: readonly Uint8Array[], command = false): Uint8Array {
  let size = 0;
  for (const b of bodies) size += b.length + (b.length > 255 ? 9 : 2);
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  let o = 0;
  bodies.forEach((b, i) => {
    const long = b.length > 255;
    out[o++] = (i < bodies.length - 1 ? FLAG_MORE : 0) | (long ? FLAG_LONG : 0) | (command ? FLAG_COMMAND : 0);
    if (long) {
      view.setUint32(o, Math.floor(b.length / 0x100000000));
      view.setUint32(o + 4, b.length >>> 0);
      o += 8;
    } else out[o++] = b.length;
    out.set(b, o);
    o += b.length;
  });
  return out;
}

/** A command frame: name-size, name, data. */
export function encodeCommand(name: string, data: Uint8Array = new Uint8Array(0)): Uint8Array {
  const n = ascii(name);
  const body = new Uint8Array(1 + n.length + data.length);
  body[0] = n.length;
  body.set(n, 1);
  body.set(data, 1 + n.length);
  return encodeFrames([body], true);
}

/** READY with its metadata properties (name-size, name, 4-byte value-size, value). */
export function encodeReady(props: Readonly<Record<string, Uint8Array>>): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const [k, v] of Object.entries(props)) {
    const name = ascii(k);
    const p = new Uint8Array(1 + name.length + 4 + v.length);
    p[0] = name.length;
    p.set(name, 1);
    new DataView(p.buffer).setUint32(1 + name.length, v.length);
    p.set(v, 5 + name.length);
    parts.push(p);
  }
  const data = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
  let o = 0;
  for (const p of parts) {
    data.set(p, o);
    o += p.length;
  }
  return encodeCommand("READY", data);
}

export interface Command {
  name: string;
  data: Uint8Array;
}

export function parseCommand(body: Uint8Array): Command {
  const n = body[0];
  if (n === undefined || n === 0 || 1 + n > body.length) throw new ZmtpError("bad-command", `command frame of ${body.length} bytes has a bad name size`);
  return { name: latin1(body.subarray(1, 1 + n)), data: body.subarray(1 + n) };
}

/** READY metadata; property names are case-insensitive (RFC 23), so the keys are lower-cased. */
export function parseMetadata(data: Uint8Array): Map<string, Uint8Array> {
  const props = new Map<string, Uint8Array>();
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let o = 0;
  while (o < data.length) {
    const n = data[o]!;
    if (n === 0 || o + 1 + n + 4 > data.length) throw new ZmtpError("bad-ready", "READY metadata property overruns the command");
    const name = latin1(data.subarray(o + 1, o + 1 + n)).toLowerCase();
    const size = view.getUint32(o + 1 + n);
    const start = o + 1 + n + 4;
    if (size > data.length - start) throw new ZmtpError("bad-ready", `READY property ${name} value overruns the command`);
    props.set(name, data.subarray(start, start + size));
    o = start + size;
  }
  return props;
}

export { latin1 as bytesToLatin1, ascii as asciiBytes };

export interface ZmtpLimits {
  /** Largest multipart message (all frames together), in bytes. */
  maxMessageBytes: number;
  /** Most frames in one message. */
  maxFrames: number;
  /** Largest command frame (READY, PING, …). */
  maxCommandBytes: number;
}

/** Bytes allocated for a frame body before its bytes arrive. */
const INITIAL_BODY = 64 * 1024;

export interface DecodedFrame {
  command: boolean;
  more: boolean;
  body: Uint8Array;
}

/**
 * Bytes in, greeting then frames out, pulled one at a time so the caller can stop (backpressure) with the rest still
 * buffered. A frame that lies whole inside the chunk being decoded comes out as a view of it (no copy, no allocation:
 * the hot path, since read chunks are far larger than engine batches); the caller must copy what it keeps, and call
 * `release()` before the chunk's memory is reused (a reused read buffer). A frame split across chunks is copied into
 * its own array, allocated only after its length passed the limits and grown with the bytes actually received.
 */
export class ZmtpDecoder {
  readonly #chunks: Uint8Array[] = [];
  #offset = 0;
  #buffered = 0;
  #greeting: Uint8Array | undefined = new Uint8Array(GREETING_SIZE);
  #greetingFill = 0;
  #body: Uint8Array | undefined;
  #bodySize = 0;
  #bodyFill = 0;
  #flags = 0;
  #messageBytes = 0;
  #messageFrames = 0;

  constructor(readonly limits: ZmtpLimits) {}

  /** Bytes received but not decoded yet. */
  get buffered(): number {
    return this.#buffered;
  }

  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
  }

  /** The peer's greeting once all 64 bytes are in (null before); validated as bytes arrive. */
  greeting(): PeerGreeting | null {
    const g = this.#greeting;
    if (!g) throw new KvgateError("KVGATE_ERR_STATE", "greeting already read");
    const before = this.#greetingFill;
    this.#greetingFill += this.#read(g, this.#greetingFill, GREETING_SIZE - this.#greetingFill);
    if (this.#greetingFill > before) checkSignaturePrefix(g, this.#greetingFill);
    if (this.#greetingFill < GREETING_SIZE) return null;
    this.#greeting = undefined;
    return parseGreeting(g);
  }

  /** The next complete frame, or null until more bytes arrive. Throws ZmtpError on anything malformed or too large. */
  next(): DecodedFrame | null {
    if (!this.#body) {
      if (this.#buffered < 1) return null;
      const view = this.#viewFrame();
      if (view) return view;
      const flags = this.#peek(0);
      if (flags & 0xf8) throw new ZmtpError("bad-frame", `frame flags 0x${flags.toString(16)} set reserved bits`);
      const long = (flags & FLAG_LONG) !== 0;
      const headerSize = long ? 9 : 2;
      if (this.#buffered < headerSize) return null;
      let size: number;
      if (long) {
        const hi = this.#peek(1) * 0x1000000 + ((this.#peek(2) << 16) | (this.#peek(3) << 8) | this.#peek(4));
        const lo = this.#peek(5) * 0x1000000 + ((this.#peek(6) << 16) | (this.#peek(7) << 8) | this.#peek(8));
        // Anything with a high word already exceeds every limit; keep it out of float arithmetic.
        size = hi > 0 ? Number.POSITIVE_INFINITY : lo;
      } else size = this.#peek(1);
      this.#check(flags, size);
      this.#skip(headerSize);
      this.#flags = flags;
      // Grown as bytes arrive (at most doubling): a 9-byte header claiming 64 MiB must not cost 64 MiB up front.
      this.#body = new Uint8Array(Math.min(size, INITIAL_BODY));
      this.#bodySize = size;
      this.#bodyFill = 0;
    }
    let body: Uint8Array = this.#body;
    for (;;) {
      this.#bodyFill += this.#read(body, this.#bodyFill, body.length - this.#bodyFill);
      if (this.#bodyFill < body.length || body.length === this.#bodySize) break;
      const grown = new Uint8Array(Math.min(this.#bodySize, body.length * 2));
      grown.set(body);
      body = this.#body = grown;
    }
    if (this.#bodyFill < this.#bodySize) return null;
    this.#body = undefined;
    return this.#frame(this.#flags, body);
  }

  /** A whole frame: the last one of a message starts the next message's limits afresh. */
  #frame(flags: number, body: Uint8Array): DecodedFrame {
    const command = (flags & FLAG_COMMAND) !== 0;
    const more = (flags & FLAG_MORE) !== 0;
    if (!command && !more) {
      this.#messageBytes = 0;
      this.#messageFrames = 0;
    }
    return { command, more, body };
  }

  /**
   * The next frame as a view of the first chunk when its header and body both lie inside it (undefined otherwise, or
   * when the header needs the checks and errors of the general path).
   */
  #viewFrame(): DecodedFrame | undefined {
    const c = this.#chunks[0]!;
    const o = this.#offset;
    const flags = c[o]!;
    if (flags & 0xf8) return undefined;
    let size: number, header: number;
    if (flags & FLAG_LONG) {
      if (c.length - o < 9 || c[o + 1]! | c[o + 2]! | c[o + 3]! | c[o + 4]!) return undefined;
      size = c[o + 5]! * 0x1000000 + ((c[o + 6]! << 16) | (c[o + 7]! << 8) | c[o + 8]!);
      header = 9;
    } else {
      if (c.length - o < 2) return undefined;
      size = c[o + 1]!;
      header = 2;
    }
    const end = o + header + size;
    if (end > c.length) return undefined;
    this.#check(flags, size);
    const body = c.subarray(o + header, end);
    this.#skip(header + size);
    return this.#frame(flags, body);
  }

  /**
   * The chunks pushed so far are about to be reused by their owner: what is still undecoded is copied out (at most the
   * rest of one read, plus a partial header), so later frames do not read overwritten bytes. Frames already returned as
   * views are not covered: the caller copied what it keeps.
   */
  release(): void {
    if (this.#buffered === 0) {
      this.#chunks.length = 0;
      this.#offset = 0;
      return;
    }
    const rest = new Uint8Array(this.#buffered);
    let at = 0;
    for (const [i, c] of this.#chunks.entries()) {
      const part = i === 0 ? c.subarray(this.#offset) : c;
      rest.set(part, at);
      at += part.length;
    }
    this.#chunks.length = 0;
    this.#chunks.push(rest);
    this.#offset = 0;
  }

  #check(flags: number, size: number): void {
    const l = this.limits;
    if (flags & FLAG_COMMAND) {
      if (flags & FLAG_MORE) throw new ZmtpError("bad-frame", "a command frame has the MORE flag");
      if (size > l.maxCommandBytes) throw new ZmtpError("frame-too-large", `command frame of ${size} bytes exceeds ${l.maxCommandBytes}`);
      return;
    }
    if (size > l.maxMessageBytes - this.#messageBytes) {
      throw new ZmtpError("frame-too-large", `message frame of ${size} bytes makes the message exceed ${l.maxMessageBytes} bytes`);
    }
    if (this.#messageFrames + 1 > l.maxFrames) throw new ZmtpError("too-many-frames", `message has more than ${l.maxFrames} frames`);
    this.#messageBytes += size;
    this.#messageFrames++;
  }

  #peek(i: number): number {
    let o = this.#offset + i;
    for (const c of this.#chunks) {
      if (o < c.length) return c[o]!;
      o -= c.length;
    }
    throw new KvgateError("KVGATE_ERR_STATE", "peek past the buffered bytes");
  }

  #skip(n: number): void {
    this.#read(undefined, 0, n);
  }

  /** Moves up to `n` buffered bytes into `dst` at `at` (or drops them); returns how many. */
  #read(dst: Uint8Array | undefined, at: number, n: number): number {
    let done = 0;
    while (done < n && this.#chunks.length > 0) {
      const c = this.#chunks[0]!;
      const take = Math.min(n - done, c.length - this.#offset);
      dst?.set(c.subarray(this.#offset, this.#offset + take), at + done);
      done += take;
      this.#offset += take;
      if (this.#offset === c.length) {
        this.#chunks.shift();
        this.#offset = 0;
      }
    }
    this.#buffered -= done;
    return done;
  }
}
