/**
 * @module Map from request id to a live value, for tables that churn once per request. V8's Map leaves a deleted
 * entry behind and compacts them all in one go every few hundred inserts (~40 µs at 256 live ids, in proportion at
 * more), which lands on one request's routing; linear probing with backward-shift deletion leaves nothing to compact.
 */

/** Grows (only ever at a new peak of live ids) to keep at most half the records occupied. */
const MIN_RECORDS = 64;

export class RequestTable<V> {
  #keys: (string | undefined)[];
  #values: (V | undefined)[];
  /** The key's hash, kept so probing compares numbers first and deletion never rehashes a string. */
  #hashes: Int32Array;
  #mask: number;
  #size = 0;
  /** Per-table odd multiplier and start value: ids may come from clients, so their probe chains must not be chosen. */
  readonly #mul: number;
  readonly #basis: number;

  constructor(random: () => number = Math.random) {
    this.#mul = (Math.floor(random() * 0x7fffffff) << 1) | 1;
    this.#basis = Math.floor(random() * 0xffffffff) | 0;
    this.#keys = new Array<string | undefined>(MIN_RECORDS).fill(undefined);
    this.#values = new Array<V | undefined>(MIN_RECORDS).fill(undefined);
    this.#hashes = new Int32Array(MIN_RECORDS);
    this.#mask = MIN_RECORDS - 1;
  }

  get size(): number {
    return this.#size;
  }

  get(id: string): V | undefined {
    const i = this.#find(id, this.#hash(id));
    return i < 0 ? undefined : this.#values[i];
  }

  has(id: string): boolean {
    return this.#find(id, this.#hash(id)) >= 0;
  }

  /** Adds or replaces the value of `id`. */
  set(id: string, value: V): void {
    const h = this.#hash(id);
    let i = h & this.#mask;
    for (let k = this.#keys[i]; k !== undefined; k = this.#keys[i]) {
      if (this.#hashes[i] === h && k === id) {
        this.#values[i] = value;
        return;
      }
      i = (i + 1) & this.#mask;
    }
    this.#keys[i] = id;
    this.#values[i] = value;
    this.#hashes[i] = h;
    if (++this.#size * 2 > this.#mask + 1) this.#grow();
  }

  /** Removes `id`; false when it was not there. */
  delete(id: string): boolean {
    let i = this.#find(id, this.#hash(id));
    if (i < 0) return false;
    this.#size--;
    const mask = this.#mask;
    // Move each later record of the probe run into the hole unless its home lies cyclically in (hole, j].
    for (let j = (i + 1) & mask; this.#keys[j] !== undefined; j = (j + 1) & mask) {
      const home = this.#hashes[j]! & mask;
      const stay = i <= j ? home > i && home <= j : home > i || home <= j;
      if (stay) continue;
      this.#keys[i] = this.#keys[j];
      this.#values[i] = this.#values[j];
      this.#hashes[i] = this.#hashes[j]!;
      i = j;
    }
    this.#keys[i] = undefined;
    this.#values[i] = undefined;
    return true;
  }

  #find(id: string, h: number): number {
    for (let i = h & this.#mask; ; i = (i + 1) & this.#mask) {
      const k = this.#keys[i];
      if (k === undefined) return -1;
      if (this.#hashes[i] === h && k === id) return i;
    }
  }

  /** FNV-1a over UTF-16 code units with a per-table basis and multiplier, then a final mix for the low bits. */
  #hash(id: string): number {
    let h = this.#basis;
    for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), this.#mul);
    h ^= h >>> 15;
    h = Math.imul(h, 0x2c1b3c6d);
    return h ^ (h >>> 12);
  }

  #grow(): void {
    const keys = this.#keys, values = this.#values, hashes = this.#hashes;
    const n = keys.length * 2;
    this.#keys = new Array<string | undefined>(n).fill(undefined);
    this.#values = new Array<V | undefined>(n).fill(undefined);
    this.#hashes = new Int32Array(n);
    this.#mask = n - 1;
    for (let j = 0; j < keys.length; j++) {
      const k = keys[j];
      if (k === undefined) continue;
      let i = hashes[j]! & this.#mask;
      while (this.#keys[i] !== undefined) i = (i + 1) & this.#mask;
      this.#keys[i] = k;
      this.#values[i] = values[j];
      this.#hashes[i] = hashes[j]!;
    }
  }
}
