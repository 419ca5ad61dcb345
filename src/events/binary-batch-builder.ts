/**
 * @module Writes decoded engine events as the core's binary records (src/core/event-encoder.ts) by copying typed-array
 * runs, and applies them in chunks the core's buffers hold; slots are set last, as the batch names its rank last.
 */
import { EventKind, RecordBuffer } from "../core/event-encoder.ts";
import { KvgateError } from "../core/errors.ts";

const HEADER = 16;

// Records are copied as u32 runs in host byte order; the core reads little-endian, like every host JS runs on.
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

export interface RecordLimits {
  /** Bytes one applyBatch call takes (KvIndex eventBytes). */
  maxBytes: number;
  /** Blocks one Stored record may carry (KvIndex eventBlocks). */
  maxBlocks: number;
}

export class BinaryBatchBuilder extends RecordBuffer {
  constructor(readonly limits: RecordLimits) {
    super(1 << 16);
    if (!LITTLE_ENDIAN) throw new KvgateError("KVGATE_ERR_STATE", "KV event ingestion needs a little-endian host");
  }

  /**
   * Stored blocks by token ids: `hashes` holds (lo, hi) pairs, `tokens` n·bs ids. Split into records the core can
   * take, each next one chained to the previous record's last hash.
   */
  storedTokens(hasParent: boolean, parent: Uint32Array, hashes: Uint32Array, n: number, tokens: Uint32Array, bs: number,
    seedLo: number, seedHi: number): void {
    const perRecord = Math.max(1, Math.min(this.limits.maxBlocks, Math.floor((this.limits.maxBytes - 40) / (8 + 4 * bs))));
    let pLo = hasParent ? parent[0]! : 0, pHi = hasParent ? parent[1]! : 0, hp = hasParent;
    for (let from = 0; from < n; from += perRecord) {
      const k = Math.min(perRecord, n - from);
      const tokenWords = k * bs + ((k * bs) & 1);
      const w = this.header(EventKind.storedTokens, hp, 0, k, bs, 16 + 8 * k + 4 * tokenWords) >>> 2;
      const u = this.u32;
      u[w] = pLo; u[w + 1] = pHi; u[w + 2] = seedLo >>> 0; u[w + 3] = seedHi >>> 0;
      copy(u, w + 4, hashes, 2 * from, 2 * k);
      const tw = w + 4 + 2 * k;
      copy(u, tw, tokens, from * bs, k * bs);
      if (tokenWords !== k * bs) u[tw + k * bs] = 0;
      pLo = hashes[2 * (from + k - 1)]!; pHi = hashes[2 * (from + k - 1) + 1]!; hp = true;
    }
  }

  /** Stored blocks with local hashes already computed (`locals` as lo, hi pairs); used for EAGLE windows. */
  stored(hasParent: boolean, parent: Uint32Array, hashes: Uint32Array, n: number, locals: Uint32Array): void {
    const perRecord = Math.max(1, Math.min(this.limits.maxBlocks, Math.floor((this.limits.maxBytes - 32) / 16)));
    let pLo = hasParent ? parent[0]! : 0, pHi = hasParent ? parent[1]! : 0, hp = hasParent;
    for (let from = 0; from < n; from += perRecord) {
      const k = Math.min(perRecord, n - from);
      const w = this.header(EventKind.stored, hp, 0, k, 0, 8 + 16 * k) >>> 2;
      const u = this.u32;
      u[w] = pLo; u[w + 1] = pHi;
      for (let i = 0; i < k; i++) {
        const j = 2 * (from + i), o = w + 2 + 4 * i;
        u[o] = hashes[j]!; u[o + 1] = hashes[j + 1]!; u[o + 2] = locals[j]!; u[o + 3] = locals[j + 1]!;
      }
      pLo = hashes[2 * (from + k - 1)]!; pHi = hashes[2 * (from + k - 1) + 1]!; hp = true;
    }
  }

  /**
   * Removed blocks. A run of Removed events (vLLM sends one per evicted block) becomes one record: the core applies
   * a record's hashes in order, so appending to the previous Removed record is the same as a record per event.
   */
  removed(hashes: Uint32Array, n: number): void {
    const max = this.limits.maxBytes;
    let from = 0;
    const last = this.starts.length - 1;
    if (last >= 0 && this.u32[this.starts[last]! >>> 2]! === EventKind.removed) {
      const at = this.starts[last]!;
      const k = Math.min(n, Math.floor((max - (this.len - at)) / 8));
      if (k > 0) {
        this.ensure(8 * k);
        copy(this.u32, this.len >>> 2, hashes, 0, 2 * k);
        const count = (at >>> 2) + 2;
        this.u32[count] = this.u32[count]! + k;
        this.len += 8 * k;
        from = k;
      }
    }
    const perRecord = Math.max(1, Math.floor((max - HEADER) / 8));
    for (; from < n; from += perRecord) {
      const k = Math.min(perRecord, n - from);
      const w = this.header(EventKind.removed, false, 0, k, 0, 8 * k) >>> 2;
      copy(this.u32, w, hashes, 2 * from, 2 * k);
    }
  }

  cleared(): void {
    this.header(EventKind.cleared, false, 0, 0, 0, 0);
  }

  /** Sets the slot of records `from` onwards. */
  setSlot(slot: number, from = 0): void {
    for (let r = from; r < this.starts.length; r++) this.u32[(this.starts[r]! >>> 2) + 1] = slot;
  }

  /** The records as consecutive chunks of at most `limits.maxBytes` bytes (views; consume before the next write). */
  *chunks(): Generator<Uint8Array> {
    const s = this.starts, max = this.limits.maxBytes;
    const endOf = (r: number): number => (r + 1 < s.length ? s[r + 1]! : this.len);
    for (let from = 0; from < s.length;) {
      let to = from + 1;
      while (to < s.length && endOf(to) - s[from]! <= max) to++;
      yield this.buf.subarray(s[from]!, endOf(to - 1));
      from = to;
    }
  }

  /** An independent copy of the records (for batches held while a replay runs). */
  snapshot(): { bytes: Uint8Array; starts: number[] } {
    return { bytes: this.buf.slice(0, this.len), starts: this.starts.slice() };
  }

  /** Replaces the contents with a snapshot. */
  restore(snap: { bytes: Uint8Array; starts: number[] }): void {
    this.reset();
    this.ensure(snap.bytes.length);
    this.buf.set(snap.bytes);
    this.len = snap.bytes.length;
    this.starts.push(...snap.starts);
  }
}

/** `n` words from `src[at…]` into `dst[to…]`: a loop for short runs (a subarray view costs more than it saves). */
function copy(dst: Uint32Array, to: number, src: Uint32Array, at: number, n: number): void {
  if (n > 64) {
    dst.set(src.subarray(at, at + n), to);
    return;
  }
  for (let i = 0; i < n; i++) dst[to + i] = src[at + i]!;
}
