/**
 * @module kvgate's compact binary KV-event batch: what the WASM core decodes in one call.
 *
 * Records are little-endian and 8-byte aligned. Header (16 bytes): kind u8, flags u8 (bit 0: has parent), u16 0,
 * slot u32, count u32, aux u32. Bodies:
 * - 1 STORED: parent u64, then count × (engine block hash u64, local block hash u64)
 * - 2 REMOVED: count × engine block hash u64
 * - 3 CLEARED: nothing
 * - 4 STORED_TOKENS (aux = block size): parent u64, local-hash seed u64, count × engine hash u64,
 *   count × aux token ids u32, zero-padded to 8 bytes; the core hashes the tokens itself.
 */

export const EventKind = { stored: 1, removed: 2, cleared: 3, storedTokens: 4 } as const;

const HAS_PARENT = 1;

/**
 * The record buffer every host-side writer of this format appends to (EventBatchWriter here, the engine-event
 * BinaryBatchBuilder in src/events): growth, record headers and record offsets live in one place.
 */
export class RecordBuffer {
  protected buf: Uint8Array;
  protected view: DataView;
  /** Word view for bulk copies (records are 8-byte aligned; words are host-endian, see BinaryBatchBuilder). */
  protected u32: Uint32Array;
  protected len = 0;
  /** Byte offset of every record. */
  protected starts: number[] = [];

  constructor(initialBytes = 4096) {
    this.buf = new Uint8Array(Math.max(16, (initialBytes + 7) & ~7));
    this.view = new DataView(this.buf.buffer);
    this.u32 = new Uint32Array(this.buf.buffer);
  }

  get byteLength(): number {
    return this.len;
  }

  get records(): number {
    return this.starts.length;
  }

  /** The encoded bytes (a view; copy before the next write if kept). */
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.len);
  }

  reset(): void {
    this.len = 0;
    this.starts.length = 0;
  }

  /** Appends a record header; returns the byte offset of its `body` bytes (8-aligned, not cleared: writers fill them). */
  protected header(kind: number, hasParent: boolean, slot: number, count: number, aux: number, body: number): number {
    this.ensure(16 + body);
    const v = this.view, at = this.len;
    v.setUint32(at, kind | (hasParent ? HAS_PARENT << 8 : 0), true);
    v.setUint32(at + 4, slot, true);
    v.setUint32(at + 8, count, true);
    v.setUint32(at + 12, aux, true);
    this.starts.push(at);
    this.len = at + 16 + body;
    return at + 16;
  }

  protected ensure(extra: number): void {
    if (this.len + extra <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + extra) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
    this.view = new DataView(next.buffer);
    this.u32 = new Uint32Array(next.buffer);
  }
}

/** Records from bigint hashes and plain arrays: for tests, benchmarks and callers that hold events as objects. */
export class EventBatchWriter extends RecordBuffer {
  stored(slot: number, parent: bigint | null, hashes: ArrayLike<bigint>, locals: ArrayLike<bigint>): this {
    const n = hashes.length;
    const at = this.header(EventKind.stored, parent !== null, slot, n, 0, 8 + n * 16);
    this.view.setBigUint64(at, parent ?? 0n, true);
    let p = at + 8;
    for (let i = 0; i < n; i++, p += 16) {
      this.view.setBigUint64(p, hashes[i]!, true);
      this.view.setBigUint64(p + 8, locals[i]!, true);
    }
    return this;
  }

  removed(slot: number, hashes: ArrayLike<bigint>): this {
    const n = hashes.length;
    let p = this.header(EventKind.removed, false, slot, n, 0, n * 8);
    for (let i = 0; i < n; i++, p += 8) this.view.setBigUint64(p, hashes[i]!, true);
    return this;
  }

  cleared(slot: number): this {
    this.header(EventKind.cleared, false, slot, 0, 0, 0);
    return this;
  }

  /** Stored blocks given by their token ids (`hashes.length × blockSize` tokens); `seed` is the local-hash seed. */
  storedTokens(slot: number, parent: bigint | null, hashes: ArrayLike<bigint>, tokens: ArrayLike<number>, blockSize: number, seed: bigint): this {
    const n = hashes.length;
    if (tokens.length !== n * blockSize) throw new RangeError(`expected ${n * blockSize} tokens, got ${tokens.length}`);
    const tokenBytes = (n * blockSize * 4 + 7) & ~7;
    const at = this.header(EventKind.storedTokens, parent !== null, slot, n, blockSize, 16 + n * 8 + tokenBytes);
    this.view.setBigUint64(at, parent ?? 0n, true);
    this.view.setBigUint64(at + 8, seed, true);
    let p = at + 16;
    for (let i = 0; i < n; i++, p += 8) this.view.setBigUint64(p, hashes[i]!, true);
    for (let i = 0; i < tokens.length; i++, p += 4) this.view.setUint32(p, tokens[i]!, true);
    if (tokens.length & 1) this.view.setUint32(p, 0, true);
    return this;
  }
}
