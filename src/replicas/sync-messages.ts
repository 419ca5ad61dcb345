/**
 * @module The wire format replicas share: subjects, KV-event headers and the booking messages (JSON), decoded
 * defensively since any process on the NATS server may publish on these subjects.
 */
import { fromBase64, toBase64 } from "../core/base64.ts";
import { KvgateError } from "../core/errors.ts";

export const EVENTS_PREFIX = "kvgate.events";
export const BOOKINGS_PREFIX = "kvgate.bookings";
export const DECISIONS_PREFIX = "kvgate.decisions";
export const HEADER_REPLICA = "kvgate-replica";
export const HEADER_WORKER = "kvgate-worker";
export const HEADER_RANK = "kvgate-rank";
export const HEADER_SEQ = "kvgate-seq";
/** Random per process: a replica restarted under the same id reads its earlier batches as a peer's. */
export const HEADER_BOOT = "kvgate-boot";
/** "1" on a batch whose engine sequence number went back at the publisher: the engine restarted. */
export const HEADER_RESTART = "kvgate-restart";

/** NATS subject tokens cannot hold dots, spaces or wildcards: worker ids (host:port) are escaped into one token. */
export function subjectToken(s: string): string {
  return s.replace(/[^A-Za-z0-9_-]/g, (c) => `~${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

export function validReplicaId(id: string): boolean {
  return /^[A-Za-z0-9_-]{1,64}$/.test(id);
}

/** A live booking as a heartbeat lists it: [booking id, worker, rank, prefill tokens still pending, blocks]. */
export type BookingTuple = [number, string, number, number, number];

export type BookingMessage =
  /**
   * `h`: the prompt's `b` sequence hashes, base64 of little-endian (lo, hi) u32 pairs; absent when not shared. `o`: the
   * decode blocks the booking expects to grow by (absent: none, or a replica from before they were shared).
   */
  | { k: "book"; r: string; id: number; w: string; dp: number; p: number; b: number; o?: number; h?: string }
  | { k: "prefill"; r: string; id: number }
  | { k: "free"; r: string; id: number }
  /**
   * `o`: each listed booking's expected output blocks, in list order (a field of its own so that a replica from before
   * they were shared still reads the list; absent from such a replica: none).
   */
  | { k: "hb"; r: string; list: BookingTuple[]; o?: number[] }
  /** Several book/prefill/free messages of one replica in one publish (replica-sync.ts batches them). */
  | { k: "many"; r: string; list: BookingChange[] };

/** The messages a "many" carries. */
export type BookingChange = Extract<BookingMessage, { k: "book" | "prefill" | "free" }>;

const enc = new TextEncoder();
const dec = new TextDecoder();

export function encodeBooking(m: BookingMessage): Uint8Array {
  return enc.encode(JSON.stringify(m));
}

const isCount = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0;
const isName = (v: unknown): v is string => typeof v === "string" && v.length > 0 && v.length <= 256;

function bad(what: string): never {
  throw new KvgateError("KVGATE_ERR_SYNC_MESSAGE", `replica booking message: ${what}`);
}

function tuple(t: unknown): BookingTuple {
  if (!Array.isArray(t) || t.length !== 5 || !isCount(t[0]) || !isName(t[1]) || !isCount(t[2]) || !isCount(t[3]) || !isCount(t[4])) bad("bad booking in a heartbeat");
  return t as BookingTuple;
}

/** Throws KVGATE_ERR_SYNC_MESSAGE for anything that is not a well-formed message of this version. */
export function decodeBooking(data: Uint8Array): BookingMessage {
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(dec.decode(data)) as Record<string, unknown>;
  } catch {
    return bad("not JSON");
  }
  return decodeObject(m, true);
}

function decodeObject(m: Record<string, unknown>, outer: boolean): BookingMessage {
  if (m === null || typeof m !== "object" || !isName(m.r)) return bad("no replica");
  const r = m.r;
  switch (m.k) {
    case "book":
      if (!isCount(m.id) || !isName(m.w) || !isCount(m.dp) || !isCount(m.p) || !isCount(m.b) || (m.o !== undefined && !isCount(m.o))) bad("bad book");
      // Base64 of b pairs of u32 is ceil(8b / 3) × 4 characters; anything else is not this booking's hashes.
      if (m.h !== undefined && (typeof m.h !== "string" || m.h.length !== 4 * Math.ceil((8 * (m.b as number)) / 3) || !/^[A-Za-z0-9+/]*={0,2}$/.test(m.h))) bad("bad hashes");
      return { k: "book", r, id: m.id as number, w: m.w as string, dp: m.dp as number, p: m.p as number, b: m.b as number,
        ...(m.o !== undefined ? { o: m.o as number } : {}), ...(m.h !== undefined ? { h: m.h as string } : {}) };
    case "prefill":
    case "free":
      if (!isCount(m.id)) bad(`bad ${m.k}`);
      return { k: m.k, r, id: m.id as number };
    case "hb":
      if (!Array.isArray(m.list)) bad("bad heartbeat");
      if (m.o !== undefined && (!Array.isArray(m.o) || m.o.length !== m.list.length || !m.o.every(isCount))) bad("bad output blocks in a heartbeat");
      return { k: "hb", r, list: (m.list as unknown[]).map(tuple), ...(m.o !== undefined ? { o: m.o as number[] } : {}) };
    case "many": {
      if (!outer || !Array.isArray(m.list)) bad("bad batch");
      const list = (m.list as Record<string, unknown>[]).map((x) => decodeObject(x, false));
      if (list.some((x) => x.r !== r || x.k === "hb" || x.k === "many")) bad("a batch holds another replica's or a nested message");
      return { k: "many", r, list: list as BookingChange[] };
    }
    default:
      return bad(`unknown kind ${JSON.stringify(m.k)}`);
  }
}

/** `blocks` (lo, hi) u32 pairs of `words` as base64 (standard alphabet, padded). */
export function encodeHashes(words: Uint32Array, blocks: number): string {
  return toBase64(new Uint8Array(words.buffer, words.byteOffset, 8 * blocks));
}

/** The inverse of encodeHashes: a fresh array of 2 × blocks words. Throws KVGATE_ERR_SYNC_MESSAGE on a bad length. */
export function decodeHashes(h: string, blocks: number): Uint32Array {
  let bytes: Uint8Array<ArrayBuffer>;
  try {
    bytes = fromBase64(h);
  } catch {
    return bad("hashes are not base64");
  }
  if (bytes.length !== 8 * blocks) bad("hashes do not match the block count");
  return new Uint32Array(bytes.buffer);
}
