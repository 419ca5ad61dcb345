/**
 * @module BlockRemoved events, one per evicted block, are most of a busy stream: this matches their exact msgspec byte
 * shapes against pre-encoded templates before the general reader runs.
 */
import type { MsgpackCursor } from "./msgpack-cursor.ts";

/** The fields of a decoded event this reader fills (EventScratch has them; declared here so neither imports the other). */
export interface RemovedTarget {
  hashes: Uint32Array;
  nHashes: number;
  tag: number;
  medium: string | null;
  groupIdx: number;
}

/** Bytes compared as big-endian 32-bit words, then the tail byte by byte. */
interface Bytes {
  length: number;
  words: Uint32Array;
  tail: Uint8Array;
}

interface Template {
  /** Bytes between the container header and the hash's 0xcf marker. */
  prefix: Bytes;
  /** Bytes after the hash, before the optional group_idx value. */
  suffix: Bytes;
  medium: string | null;
  group: boolean;
}

const enc = new TextEncoder();
const str = (s: string): number[] => [0xa0 | s.length, ...enc.encode(s)];
function bytes(b: number[]): Bytes {
  const n = b.length >> 2;
  const v = new DataView(Uint8Array.from(b).buffer);
  return { length: b.length, words: Uint32Array.from({ length: n }, (_, i) => v.getUint32(4 * i)), tail: Uint8Array.from(b.slice(4 * n)) };
}
const tpl = (prefix: number[], suffix: number[], medium: string | null, group: boolean): Template =>
  ({ prefix: bytes(prefix), suffix: bytes(suffix), medium, group });

const TAG = str("BlockRemoved");
const MAP_HEAD = [...str("type"), ...TAG, ...str("block_hashes"), 0x91];
/** Indexed by the event's first byte (its container header). */
const BY_HEAD: (Template | undefined)[] = [];
BY_HEAD[0x92] = tpl([...TAG, 0x91], [], null, false); // [tag, [h]] (v0.9)
BY_HEAD[0x93] = tpl([...TAG, 0x91], str("GPU"), "GPU", false); // [tag, [h], "GPU"]
BY_HEAD[0x94] = tpl([...TAG, 0x91], str("GPU"), "GPU", true); // [tag, [h], "GPU", group_idx]
BY_HEAD[0x83] = tpl(MAP_HEAD, [...str("medium"), ...str("GPU")], "GPU", false);
BY_HEAD[0x84] = tpl(MAP_HEAD, [...str("medium"), ...str("GPU"), ...str("group_idx")], "GPU", true);

function matches(v: DataView, buf: Uint8Array, at: number, b: Bytes): boolean {
  const w = b.words, t = b.tail;
  for (let i = 0; i < w.length; i++) if (v.getUint32(at + 4 * i) !== w[i]) return false;
  const base = at + 4 * w.length;
  for (let i = 0; i < t.length; i++) if (buf[base + i] !== t[i]) return false;
  return true;
}

/** Reads the event at the cursor into `e` if it has one of the common shapes; false (cursor unmoved) otherwise. */
export function readCommonRemoved(c: MsgpackCursor, e: RemovedTarget, tag: number): boolean {
  const buf = c.buf, p = c.pos;
  const t = BY_HEAD[buf[p]!];
  if (t === undefined) return false;
  const h = p + 1 + t.prefix.length;
  const end = h + 9 + t.suffix.length + (t.group ? 1 : 0);
  const v = c.view;
  if (end > c.end || buf[h] !== 0xcf || !matches(v, buf, p + 1, t.prefix) || !matches(v, buf, h + 9, t.suffix)) return false;
  let group = -1;
  if (t.group) {
    group = buf[end - 1]!;
    if (group > 0x7f) return false;
  }
  e.hashes[0] = v.getUint32(h + 5);
  e.hashes[1] = v.getUint32(h + 1);
  e.nHashes = 1;
  e.tag = tag;
  e.medium = t.medium;
  e.groupIdx = group;
  c.pos = end;
  return true;
}
