/**
 * @module Reads one engine KV event (array or map form, docs/kv-events.md) into a reusable typed-array record, so a batch
 * of thousands of blocks decodes without allocating per block.
 */
import { corruptEvent, type MsgpackCursor } from "./msgpack-cursor.ts";
import { readCommonRemoved } from "./removed-fast-path.ts";

export const TAG_UNKNOWN = 0;
export const TAG_STORED = 1;
export const TAG_REMOVED = 2;
export const TAG_CLEARED = 3;

// Field ids equal BlockStored's positions in the legacy array form (tag at 0).
const F_SKIP = 0, F_HASHES = 1, F_PARENT = 2, F_TOKENS = 3, F_BLOCK_SIZE = 4, F_LORA_ID = 5, F_MEDIUM = 6,
  F_LORA_NAME = 7, F_EXTRA_KEYS = 8, F_GROUP = 9, F_SPEC_KIND = 10;
/** Legacy positions: BlockStored [tag, hashes, parent, tokens, block_size, lora_id, medium, lora_name, extra_keys, group_idx, spec_kind, …]. */
const STORED_LAYOUT = [F_SKIP, F_HASHES, F_PARENT, F_TOKENS, F_BLOCK_SIZE, F_LORA_ID, F_MEDIUM, F_LORA_NAME, F_EXTRA_KEYS, F_GROUP, F_SPEC_KIND];
/** BlockRemoved [tag, hashes, medium, group_idx]. */
const REMOVED_LAYOUT = [F_SKIP, F_HASHES, F_MEDIUM, F_GROUP];
const NO_LAYOUT: number[] = [];

const enc = new TextEncoder();
const TAGS = ["BlockStored", "BlockRemoved", "AllBlocksCleared"].map((s) => enc.encode(s));
/** Map keys in field-id order; index 0 is the tag key. */
/** Strings met on nearly every event, matched as bytes to spare a string allocation per event. */
const MEDIA_NAMES = ["GPU", "CPU"];
const MEDIA = MEDIA_NAMES.map((s) => enc.encode(s));
const SPEC_KIND_NAMES = ["full_attention", "sliding_window"];
const SPEC_KINDS = SPEC_KIND_NAMES.map((s) => enc.encode(s));
const MAP_KEYS = ["type", "block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
  "extra_keys", "group_idx", "kv_cache_spec_kind"].map((s) => enc.encode(s));

export class EventScratch {
  tag = TAG_UNKNOWN;
  /** Block hashes as (low, high) u32 pairs. */
  hashes = new Uint32Array(128);
  nHashes = 0;
  hasParent = false;
  parent = new Uint32Array(2);
  /** Flat token ids; for EAGLE bigrams, the first of each pair plus the last pair's second (n·bs + 1 ids). */
  tokens = new Uint32Array(2048);
  nTokens = 0;
  eagle = false;
  /** -1 when the event carries none. */
  blockSize = -1;
  medium: string | null = null;
  loraId: number | null = null;
  loraName: string | null = null;
  /** Some block's extra_keys hold more than the LoRA name and a root event's cache_salt (multimodal hashes, prompt embeds). */
  foreignExtraKeys = false;
  /** A root event's first block names one more string than the LoRA name: vLLM's cache_salt (the cache namespace). */
  cacheSalt: string | null = null;
  /** -1 when absent. */
  groupIdx = -1;
  specKind: string | null = null;
  #seen = 0;
  #extraKeysAt = -1;

  #reset(): void {
    this.tag = TAG_UNKNOWN;
    this.nHashes = 0;
    this.hasParent = false;
    this.nTokens = 0;
    this.eagle = false;
    this.blockSize = -1;
    this.medium = null;
    this.loraId = null;
    this.loraName = null;
    this.foreignExtraKeys = false;
    this.cacheSalt = null;
    this.groupIdx = -1;
    this.specKind = null;
    this.#seen = 0;
    this.#extraKeysAt = -1;
  }

  /** Reads the event at the cursor. Malformed known fields throw; unknown tags and fields are skipped. */
  read(c: MsgpackCursor): void {
    this.#reset();
    if (readCommonRemoved(c, this, TAG_REMOVED)) return;
    const b = c.peek();
    if ((b & 0xf0) === 0x90 || b === 0xdc || b === 0xdd) {
      const n = c.array();
      if (n === 0) throw corruptEvent("empty event array");
      if (!c.isStr()) throw corruptEvent("event tag is not a string");
      this.tag = c.key(TAGS) + 1;
      const layout = this.tag === TAG_STORED ? STORED_LAYOUT : this.tag === TAG_REMOVED ? REMOVED_LAYOUT : NO_LAYOUT;
      for (let i = 1; i < n; i++) this.#field(c, i < layout.length ? layout[i]! : F_SKIP);
    } else if ((b & 0xf0) === 0x80 || b === 0xde || b === 0xdf) {
      const n = c.map();
      for (let i = 0; i < n; i++) {
        if (!c.isStr()) { c.skip(); c.skip(); continue; }
        const k = c.key(MAP_KEYS);
        if (k === 0) {
          if (!c.isStr()) throw corruptEvent("event type is not a string");
          this.tag = c.key(TAGS) + 1;
        } else {
          this.#field(c, k < 0 ? F_SKIP : k);
        }
      }
    } else {
      throw corruptEvent("an event is neither an array nor a map");
    }
    const required = this.tag === TAG_STORED ? (1 << F_HASHES) | (1 << F_TOKENS) : this.tag === TAG_REMOVED ? 1 << F_HASHES : 0;
    if ((this.#seen & required) !== required) throw corruptEvent("event misses block_hashes or token_ids");
    if (this.#extraKeysAt >= 0) this.#checkExtraKeys(c);
  }

  #field(c: MsgpackCursor, f: number): void {
    this.#seen |= 1 << f;
    switch (f) {
      case F_HASHES: this.#readHashes(c); return;
      case F_PARENT:
        if (c.isNil()) { c.pos++; return; }
        c.hash(this.parent, 0);
        this.hasParent = true;
        return;
      case F_TOKENS: this.#readTokens(c); return;
      case F_BLOCK_SIZE: if (c.isNil()) c.pos++; else this.blockSize = c.uint(); return;
      case F_LORA_ID: if (c.isNil()) c.pos++; else this.loraId = c.int(); return;
      case F_MEDIUM: this.medium = knownStr(c, MEDIA, MEDIA_NAMES); return;
      case F_LORA_NAME: this.loraName = optStr(c); return;
      case F_EXTRA_KEYS: this.#extraKeysAt = c.pos; c.skip(); return;
      case F_GROUP: if (c.isNil()) c.pos++; else this.groupIdx = c.int(); return;
      case F_SPEC_KIND: this.specKind = knownStr(c, SPEC_KINDS, SPEC_KIND_NAMES); return;
      default: c.skip();
    }
  }

  #readHashes(c: MsgpackCursor): void {
    const n = c.array();
    if (this.hashes.length < 2 * n) this.hashes = new Uint32Array(Math.max(2 * n, this.hashes.length * 2));
    const h = this.hashes, buf = c.buf, end = c.end;
    let p = c.pos;
    for (let i = 0; i < n; i++) {
      // uint64 (vLLM's usual form) read inline; every other form through the checked reader.
      if (buf[p] === 0xcf && p + 9 <= end) {
        h[2 * i + 1] = ((buf[p + 1]! << 24) | (buf[p + 2]! << 16) | (buf[p + 3]! << 8) | buf[p + 4]!) >>> 0;
        h[2 * i] = ((buf[p + 5]! << 24) | (buf[p + 6]! << 16) | (buf[p + 7]! << 8) | buf[p + 8]!) >>> 0;
        p += 9;
      } else {
        c.pos = p;
        c.hash(h, 2 * i);
        p = c.pos;
      }
    }
    c.pos = p;
    this.nHashes = n;
  }

  #readTokens(c: MsgpackCursor): void {
    const n = c.array();
    if (this.tokens.length < n + 1) this.tokens = new Uint32Array(Math.max(n + 1, this.tokens.length * 2));
    const t = this.tokens;
    if (n > 0 && c.isArray()) {
      // EAGLE bigrams [(t0,t1),(t1,t2),…]: keep the firsts, then the last pair's second.
      this.eagle = true;
      for (let i = 0; i < n; i++) {
        if (c.array() !== 2) throw corruptEvent("EAGLE token pair is not a pair");
        t[i] = tokenId(c);
        const second = tokenId(c);
        if (i === n - 1) t[n] = second;
      }
      this.nTokens = n + 1;
      return;
    }
    let i = 0;
    const p = fastTokens(c.buf, c.view, c.pos, c.end, t, n);
    if (p >= 0) {
      c.pos = p;
      i = n;
    }
    for (; i < n; i++) t[i] = tokenId(c); // an unusual width somewhere: the checked reader from the start
    this.nTokens = n;
  }

  /**
   * A block's extra keys are benign when absent or when they only name the event's LoRA adapter; vLLM adds the
   * request's cache_salt to the keys of the request's first block only (start_token_idx 0), so one more string there
   * is the salt when the event starts a sequence (no parent).
   */
  #checkExtraKeys(c: MsgpackCursor): void {
    const end = c.pos;
    c.pos = this.#extraKeysAt;
    if (c.isNil()) { c.pos = end; return; }
    if (!c.isArray()) { this.foreignExtraKeys = true; c.pos = end; return; }
    const n = c.array();
    for (let i = 0; i < n && !this.foreignExtraKeys; i++) {
      if (c.isNil()) { c.pos++; continue; }
      if (!c.isArray()) { this.foreignExtraKeys = true; break; }
      const m = c.array();
      for (let j = 0; j < m; j++) {
        const s = c.isStr() ? c.str() : null;
        if (s !== null && s === this.loraName) continue;
        if (s !== null && s.length > 0 && i === 0 && !this.hasParent && this.cacheSalt === null) { this.cacheSalt = s; continue; }
        this.foreignExtraKeys = true;
        break;
      }
    }
    if (this.foreignExtraKeys) this.cacheSalt = null;
    c.pos = end;
  }
}

/** nil, one of `names` (returned as the shared constant), or any other string. */
function knownStr(c: MsgpackCursor, keys: readonly Uint8Array[], names: readonly string[]): string | null {
  if (c.isNil()) { c.pos++; return null; }
  const at = c.pos;
  const k = c.key(keys);
  if (k >= 0) return names[k]!;
  c.pos = at;
  return c.str();
}

function optStr(c: MsgpackCursor): string | null {
  if (c.isNil()) { c.pos++; return null; }
  return c.str();
}

function tokenId(c: MsgpackCursor): number {
  const v = c.uint();
  if (v > 0xffffffff) throw corruptEvent(`token id ${v} beyond u32`);
  return v;
}

/**
 * Token ids in the widths msgspec uses for vocabularies (fixint, uint8, uint16, uint32), two uint16s at a time when
 * they follow each other (most ids of a 150k vocabulary). Returns the position after the last id, or -1 when an id
 * has another encoding or the frame ends early (the caller then re-reads with the checked reader).
 */
function fastTokens(buf: Uint8Array, view: DataView, p: number, end: number, t: Uint32Array, n: number): number {
  let i = 0;
  while (i < n) {
    const b = buf[p];
    if (b === 0xcd) {
      if (p + 6 <= end && buf[p + 3] === 0xcd && i + 1 < n) {
        t[i] = view.getUint16(p + 1);
        t[i + 1] = view.getUint16(p + 4);
        i += 2;
        p += 6;
        continue;
      }
      if (p + 3 > end) return -1;
      t[i++] = view.getUint16(p + 1);
      p += 3;
    } else if (b !== undefined && b < 0x80) {
      t[i++] = b;
      p++;
    } else if (b === 0xce && p + 5 <= end) {
      t[i++] = view.getUint32(p + 1);
      p += 5;
    } else if (b === 0xcc && p + 2 <= end) {
      t[i++] = buf[p + 1]!;
      p += 2;
    } else {
      return -1;
    }
  }
  return p;
}
