/**
 * @module Reference counts of in-flight prompt blocks on one rank, keyed by 64-bit sequence hash. A typed-array hash
 * table instead of a Map because booking an 8k-token prompt touches 512 keys and a Map costs ~25 ns per touch.
 */

const EMPTY_CAPACITY = 64;

/**
 * Open addressing with linear probing; a key is two u32 words (lo, hi) and a count of 0 marks an empty cell.
 * Deletion shifts the following cluster back instead of leaving tombstones, so lookups never degrade.
 * Keys are passed as interleaved pairs: keys[2i] = lo, keys[2i + 1] = hi (a BigUint64Array's bytes viewed as u32).
 */
export class BlockCounter {
  #lo = new Uint32Array(EMPTY_CAPACITY);
  #hi = new Uint32Array(EMPTY_CAPACITY);
  #count = new Int32Array(EMPTY_CAPACITY);
  #mask = EMPTY_CAPACITY - 1;
  #size = 0;

  /** Distinct keys with a count above zero. */
  get size(): number {
    return this.#size;
  }

  #home(lo: number, hi: number): number {
    return (lo ^ Math.imul(hi, 0x9e3779b1)) & this.#mask;
  }

  #find(lo: number, hi: number): number {
    let i = this.#home(lo, hi);
    while (this.#count[i]! !== 0) {
      if (this.#lo[i] === lo && this.#hi[i] === hi) return i;
      i = (i + 1) & this.#mask;
    }
    return -1;
  }

  has(lo: number, hi: number): boolean {
    return this.#find(lo, hi) >= 0;
  }

  /** Count of one key (0 when absent). */
  countOf(lo: number, hi: number): number {
    const i = this.#find(lo, hi);
    return i < 0 ? 0 : this.#count[i]!;
  }

  /** Increments the first `n` keys; returns how many of them were not present before. */
  add(keys: Uint32Array, n: number): number {
    if ((this.#size + n) * 2 > this.#mask + 1) this.#grow(this.#size + n);
    let fresh = 0;
    for (let k = 0; k < n; k++) {
      const lo = keys[2 * k]!, hi = keys[2 * k + 1]!;
      let i = this.#home(lo, hi);
      for (;;) {
        const c = this.#count[i]!;
        if (c === 0) {
          this.#lo[i] = lo;
          this.#hi[i] = hi;
          this.#count[i] = 1;
          this.#size++;
          fresh++;
          break;
        }
        if (this.#lo[i] === lo && this.#hi[i] === hi) {
          this.#count[i] = c + 1;
          break;
        }
        i = (i + 1) & this.#mask;
      }
    }
    return fresh;
  }

  /** Decrements the first `n` keys (each must have been added); returns how many dropped to zero. */
  remove(keys: Uint32Array, n: number): number {
    let gone = 0;
    for (let k = 0; k < n; k++) {
      const i = this.#find(keys[2 * k]!, keys[2 * k + 1]!);
      if (i < 0) throw new Error("BlockCounter: removing a key that was never added");
      const c = this.#count[i]! - 1;
      if (c > 0) {
        this.#count[i] = c;
        continue;
      }
      this.#erase(i);
      gone++;
    }
    if (this.#size === 0 && this.#mask + 1 > EMPTY_CAPACITY) this.#reset(EMPTY_CAPACITY);
    return gone;
  }

  /**
   * How many leading keys are present. Valid because every booking adds its whole chain from block 0, so the
   * present set is closed under prefixes and presence is monotone along a prompt: a binary search suffices.
   */
  prefixDepth(keys: Uint32Array, n: number): number {
    if (this.#size === 0) return 0;
    let lo = 0, hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#find(keys[2 * mid]!, keys[2 * mid + 1]!) >= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  #erase(i: number): void {
    const mask = this.#mask;
    this.#count[i] = 0;
    this.#size--;
    // Backward-shift: pull later members of the probe cluster into the hole when their home allows it.
    let hole = i;
    let j = (i + 1) & mask;
    while (this.#count[j]! !== 0) {
      const home = this.#home(this.#lo[j]!, this.#hi[j]!);
      const movable = hole <= j ? home <= hole || home > j : home <= hole && home > j;
      if (movable) {
        this.#lo[hole] = this.#lo[j]!;
        this.#hi[hole] = this.#hi[j]!;
        this.#count[hole] = this.#count[j]!;
        this.#count[j] = 0;
        hole = j;
      }
      j = (j + 1) & mask;
    }
  }

  #grow(need: number): void {
    let cap = this.#mask + 1;
    while (need * 2 > cap) cap *= 2;
    const lo = this.#lo, hi = this.#hi, count = this.#count;
    this.#reset(cap);
    for (let i = 0; i < count.length; i++) {
      const c = count[i]!;
      if (c === 0) continue;
      let j = this.#home(lo[i]!, hi[i]!);
      while (this.#count[j]! !== 0) j = (j + 1) & this.#mask;
      this.#lo[j] = lo[i]!;
      this.#hi[j] = hi[i]!;
      this.#count[j] = c;
      this.#size++;
    }
  }

  #reset(cap: number): void {
    this.#lo = new Uint32Array(cap);
    this.#hi = new Uint32Array(cap);
    this.#count = new Int32Array(cap);
    this.#mask = cap - 1;
    this.#size = 0;
  }
}
