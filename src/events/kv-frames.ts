/**
 * @module The body `kvgate bridge` POSTs to /admin/kv-events: engine messages forwarded byte for byte, so the router
 * decodes and orders them itself (layout in docs/kv-events.md#transports-into-the-streams).
 */
import { KvgateError } from "../core/errors.ts";

export const KV_FRAMES_CONTENT_TYPE = "application/vnd.kvgate.kv-frames";
const MAGIC = [0x4b, 0x56, 0x46, 0x31]; // "KVF1"

export interface KvFrame {
  /** The engine's sequence frame (8 bytes), unchanged. */
  seq: Uint8Array;
  topic: Uint8Array;
  /** One msgpack KVEventBatch, unchanged. */
  payload: Uint8Array;
}

/** Bytes `frame` takes in a body. */
export function frameSize(f: KvFrame): number {
  return 8 + 2 + f.topic.length + 4 + f.payload.length;
}

export function encodeKvFrames(frames: readonly KvFrame[]): Uint8Array<ArrayBuffer> {
  let n = MAGIC.length;
  for (const f of frames) n += frameSize(f);
  const out = new Uint8Array(n);
  const v = new DataView(out.buffer);
  out.set(MAGIC, 0);
  let o = MAGIC.length;
  for (const f of frames) {
    if (f.seq.length !== 8) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `a sequence frame has 8 bytes, got ${f.seq.length}`);
    if (f.topic.length > 0xffff) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "topic longer than 65,535 bytes");
    out.set(f.seq, o);
    o += 8;
    v.setUint16(o, f.topic.length);
    out.set(f.topic, o + 2);
    o += 2 + f.topic.length;
    v.setUint32(o, f.payload.length);
    out.set(f.payload, o + 4);
    o += 4 + f.payload.length;
  }
  return out;
}

/** The messages of a body (views into it, no copies); a typed 400 when it is not one. */
export function decodeKvFrames(body: Uint8Array): KvFrame[] {
  const bad = (why: string): never => {
    throw new KvgateError("KVGATE_ERR_CORRUPT_EVENT", `not a kv-frames body: ${why}`);
  };
  if (body.length < 4 || MAGIC.some((b, i) => body[i] !== b)) bad("missing the KVF1 magic");
  const v = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const frames: KvFrame[] = [];
  let o = 4;
  while (o < body.length) {
    if (o + 10 > body.length) bad(`truncated header at byte ${o}`);
    const seq = body.subarray(o, o + 8);
    const topicLen = v.getUint16(o + 8);
    o += 10;
    if (o + topicLen + 4 > body.length) bad(`truncated topic at byte ${o}`);
    const topic = body.subarray(o, o + topicLen);
    o += topicLen;
    const len = v.getUint32(o);
    o += 4;
    if (o + len > body.length) bad(`truncated payload at byte ${o}`);
    frames.push({ seq, topic, payload: body.subarray(o, o + len) });
    o += len;
  }
  return frames;
}
