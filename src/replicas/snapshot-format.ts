/**
 * @module The bytes of a replica's warm-restart snapshot: a versioned header, the index dump, session bindings and each
 * engine stream's last sequence number, sealed with a SHA-256 so a damaged or foreign object is refused, not half-loaded.
 *
 *   "KVGS" | format u32 | stream seq f64 | taken at (unix ms) f64 | JSON length u32 | records length u32
 *   | JSON (slots, sessions, streams, replica) | records (src/core/index-snapshot.ts) | SHA-256 of everything before
 */
import { KvgateError } from "../core/errors.ts";
import { ENTRY_RECORD_BYTES, type IndexDump } from "../core/index-snapshot.ts";

export const SNAPSHOT_FORMAT = 1;
const MAGIC = 0x5347564b; // "KVGS" little-endian
const HEADER_BYTES = 32;
const DIGEST_BYTES = 32;

export interface ReplicaSnapshot {
  /** The replica that took it. */
  replica: string;
  /** The last event-stream sequence its index covers; replay starts after it. */
  streamSeq: number;
  /** Unix ms. */
  takenAt: number;
  index: IndexDump;
  /** [session id, worker, dp rank]. */
  sessions: [string, string, number][];
  /** [worker, dp rank, last applied engine sequence number] per KV-event stream. */
  streams: [string, number, number][];
}

export type SnapshotRefusal = "format" | "corrupt";

export class SnapshotError extends KvgateError {
  constructor(readonly reason: SnapshotRefusal, message: string) {
    super("KVGATE_ERR_SNAPSHOT", message);
  }
}

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true });

async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
}

export async function encodeSnapshot(s: ReplicaSnapshot): Promise<Uint8Array> {
  const json = enc.encode(JSON.stringify({ replica: s.replica, slots: s.index.slots, sessions: s.sessions, streams: s.streams }));
  const body = HEADER_BYTES + json.length + s.index.records.length;
  const out = new Uint8Array(body + DIGEST_BYTES);
  const v = new DataView(out.buffer);
  v.setUint32(0, MAGIC, true);
  v.setUint32(4, SNAPSHOT_FORMAT, true);
  v.setFloat64(8, s.streamSeq, true);
  v.setFloat64(16, s.takenAt, true);
  v.setUint32(24, json.length, true);
  v.setUint32(28, s.index.records.length, true);
  out.set(json, HEADER_BYTES);
  out.set(s.index.records, HEADER_BYTES + json.length);
  out.set(await sha256(out.subarray(0, body)), body);
  return out;
}

/** The format version a blob says it has, or undefined when it is no snapshot at all. */
export function snapshotFormat(bytes: Uint8Array): number | undefined {
  if (bytes.length < 8) return undefined;
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return v.getUint32(0, true) === MAGIC ? v.getUint32(4, true) : undefined;
}

const isCount = (x: unknown): x is number => typeof x === "number" && Number.isInteger(x) && x >= 0;
const isName = (x: unknown): x is string => typeof x === "string" && x.length > 0 && x.length <= 1024;

function corrupt(what: string): never {
  throw new SnapshotError("corrupt", `snapshot: ${what}`);
}

/** Throws SnapshotError ("format" for another version, "corrupt" for anything damaged) rather than return part of one. */
export async function decodeSnapshot(bytes: Uint8Array): Promise<ReplicaSnapshot> {
  const format = snapshotFormat(bytes);
  if (format === undefined) corrupt("not a kvgate snapshot");
  if (format !== SNAPSHOT_FORMAT) throw new SnapshotError("format", `snapshot format ${format}, this kvgate reads ${SNAPSHOT_FORMAT}`);
  if (bytes.length < HEADER_BYTES + DIGEST_BYTES) corrupt("truncated header");
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const jsonLen = v.getUint32(24, true), recLen = v.getUint32(28, true);
  const body = HEADER_BYTES + jsonLen + recLen;
  if (body + DIGEST_BYTES !== bytes.length || recLen % ENTRY_RECORD_BYTES !== 0) corrupt("lengths do not add up");
  const want = await sha256(bytes.subarray(0, body));
  const got = bytes.subarray(body);
  if (want.some((b, i) => b !== got[i])) corrupt("checksum mismatch");
  const streamSeq = v.getFloat64(8, true), takenAt = v.getFloat64(16, true);
  if (!isCount(streamSeq) || !Number.isFinite(takenAt)) corrupt("bad header");
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(dec.decode(bytes.subarray(HEADER_BYTES, HEADER_BYTES + jsonLen))) as Record<string, unknown>;
  } catch {
    return corrupt("unreadable tables");
  }
  const slots = j.slots, sessions = j.sessions, streams = j.streams;
  if (!isName(j.replica) || !Array.isArray(slots) || !Array.isArray(sessions) || !Array.isArray(streams)) corrupt("missing tables");
  for (const s of slots as unknown[]) {
    const o = s as Record<string, unknown>;
    if (!o || !isCount(o.slot) || !isName(o.worker) || !isCount(o.dpRank)) corrupt("bad slot table");
  }
  for (const s of sessions as unknown[]) if (!Array.isArray(s) || s.length !== 3 || !isName(s[0]) || !isName(s[1]) || !isCount(s[2])) corrupt("bad session");
  for (const s of streams as unknown[]) if (!Array.isArray(s) || s.length !== 3 || !isName(s[0]) || !isCount(s[1]) || !isCount(s[2])) corrupt("bad stream");
  return {
    replica: j.replica as string, streamSeq, takenAt,
    // A copy of its own (the constructor copies; a Node Buffer's slice would be a view into the client's pool).
    index: { slots: slots as IndexDump["slots"], records: new Uint8Array(bytes.subarray(HEADER_BYTES + jsonLen, body)) },
    sessions: sessions as ReplicaSnapshot["sessions"], streams: streams as ReplicaSnapshot["streams"],
  };
}
