/**
 * @module Per index slot, the numbers the cost function reads about a rank, in one typed array that RankLoad keeps
 * current: selection reads a candidate's row by slot instead of chasing its rank, worker, load and remote-load objects,
 * so its cost per candidate stays flat as the fleet grows.
 */

/** Columns of a slot's row; a row is 8 doubles (one 64-byte cache line). */
export const LoadCol = {
  /** Prefill tokens queued there and not yet prefilled, this replica's and its peers' (the cost's prefill term). */
  prefill: 0,
  /** Decode blocks: the larger of the engine's reported KV usage and the bookings' blocks (local, expected output, peers'). */
  decode: 1,
  /** 1 while any booking (local or a peer's) is live there: only then does in-flight overlap count as active. */
  active: 2,
  /** The rank's rendezvous key (rankKeyOf). */
  key: 3,
  blockSize: 4,
  /** 1 when its block hashes use EAGLE windows. */
  eagle: 5,
  /** 1 when its worker publishes KV events. */
  kvEvents: 6,
} as const;

export const LOAD_ROW = 8;

/** What a slot's row says about the rank holding it, fixed while that rank is registered. */
export interface SlotIdentity {
  key: number;
  blockSize: number;
  eagle: boolean;
  kvEvents: boolean;
}

export class LoadTable {
  readonly rows: Float64Array;
  /** Bumped whenever a slot changes hands: a reader that mapped slots to its own positions must map them again. */
  epoch = 0;
  /** Slots whose load changed since the last clearDirty, in the first `dirtyCount` entries (each once). */
  readonly dirty: Int32Array;
  dirtyCount = 0;
  readonly #isDirty: Uint8Array;

  constructor(readonly maxSlots: number) {
    this.rows = new Float64Array(maxSlots * LOAD_ROW);
    this.dirty = new Int32Array(maxSlots);
    this.#isDirty = new Uint8Array(maxSlots);
  }

  clearDirty(): void {
    for (let d = 0; d < this.dirtyCount; d++) this.#isDirty[this.dirty[d]!] = 0;
    this.dirtyCount = 0;
  }

  /** A rank takes the slot: its identity, and no load until its RankLoad writes some. */
  claim(slot: number, id: SlotIdentity): void {
    const o = this.#offset(slot);
    this.epoch++;
    this.rows.fill(0, o, o + LOAD_ROW);
    this.rows[o + LoadCol.key] = id.key;
    this.rows[o + LoadCol.blockSize] = id.blockSize;
    this.rows[o + LoadCol.eagle] = id.eagle ? 1 : 0;
    this.rows[o + LoadCol.kvEvents] = id.kvEvents ? 1 : 0;
  }

  /** The slot's rank is gone: its row reads as an unknown rank (block size 0) until the slot is claimed again. */
  release(slot: number): void {
    const o = this.#offset(slot);
    this.epoch++;
    this.rows.fill(0, o, o + LOAD_ROW);
  }

  /** Written by RankLoad after every change of the numbers the cost reads. */
  setLoad(slot: number, prefill: number, decode: number, active: boolean): void {
    const o = this.#offset(slot);
    this.rows[o + LoadCol.prefill] = prefill;
    this.rows[o + LoadCol.decode] = decode;
    this.rows[o + LoadCol.active] = active ? 1 : 0;
    if (this.#isDirty[slot] === 0) {
      this.#isDirty[slot] = 1;
      this.dirty[this.dirtyCount++] = slot;
    }
  }

  #offset(slot: number): number {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.maxSlots) throw new RangeError(`slot ${slot} outside the load table (${this.maxSlots})`);
    return slot * LOAD_ROW;
  }
}
