/**
 * @module The ZeroMQ framing of engine KV events without the socket (docs/kv-events.md#on-the-wire): runtime-neutral, so
 * frames the bridge forwards over HTTP reach the same stream.
 */

export interface SeqFrame {
  seq: number;
  payload: Uint8Array;
}

/** Not a sequence number (wrong length or beyond 2^53). */
export const BAD_SEQ = -1;
/** The replay END marker. */
export const END_SEQ = -2;

/** The sequence number in an 8-byte big-endian frame; BAD_SEQ or END_SEQ otherwise. */
export function readSeq(frame: Uint8Array | undefined): number {
  if (!frame || frame.length !== 8) return BAD_SEQ;
  const v = new DataView(frame.buffer, frame.byteOffset, 8);
  const hi = v.getUint32(0), lo = v.getUint32(4);
  if (hi === 0xffffffff && lo === 0xffffffff) return END_SEQ;
  if (hi >= 0x200000) return BAD_SEQ;
  return hi * 0x100000000 + lo;
}

export function encodeSeq(seq: number): Uint8Array {
  const out = new Uint8Array(8);
  const v = new DataView(out.buffer);
  v.setUint32(0, Math.floor(seq / 0x100000000));
  v.setUint32(4, seq >>> 0);
  return out;
}

/** The sequence number of a live PUB message (exactly three frames, an 8-byte sequence number; the payload is the
 * third), or BAD_SEQ when malformed: what a stream reads per message, without building a SeqFrame. */
export function liveSeq(frames: readonly Uint8Array[]): number {
  if (frames.length !== 3) return BAD_SEQ;
  const seq = readSeq(frames[1]);
  return seq < 0 ? BAD_SEQ : seq;
}

/** A live PUB message: exactly three frames with an 8-byte sequence number; null when malformed. */
export function parseLiveMessage(frames: readonly Uint8Array[]): SeqFrame | null {
  const seq = liveSeq(frames);
  return seq < 0 ? null : { seq, payload: frames[2]! };
}

/**
 * A reply on the replay DEALER: `[b"", seq, payload]` (vLLM before PR #45177) or `[b"", topic, seq, payload]` (after);
 * the sequence number and payload are always the last two frames. Returns "end" at the END marker, null if malformed.
 */
export function parseReplayReply(frames: readonly Uint8Array[]): SeqFrame | "end" | null {
  if (frames.length < 2 || frames.length > 4) return null;
  const seq = readSeq(frames[frames.length - 2]);
  if (seq === END_SEQ) return "end";
  if (seq < 0) return null;
  return { seq, payload: frames[frames.length - 1]! };
}

/** The frames a DEALER sends to ask for batches from `seq` on (the ROUTER sees `[identity, b"", seq]`). */
export function replayRequest(seq: number): Uint8Array[] {
  return [new Uint8Array(0), encodeSeq(seq)];
}

/**
 * Frames as plain Uint8Array views (no copy) when a transport hands out a subclass such as Node's Buffer: the
 * decoder's hot loops then see one typed-array class whatever the transport (mixing the two made them polymorphic
 * and ingestion markedly slower in the events benchmark).
 */
export function plainFrames(frames: readonly Uint8Array[]): Uint8Array[] {
  const out = new Array<Uint8Array>(frames.length);
  for (let i = 0; i < frames.length; i++) out[i] = plainFrame(frames[i]!);
  return out;
}

/** One frame as a plain Uint8Array view (see plainFrames). */
export function plainFrame(f: Uint8Array): Uint8Array {
  return f.constructor === Uint8Array ? f : new Uint8Array(f.buffer, f.byteOffset, f.byteLength);
}
