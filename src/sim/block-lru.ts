/**
 * @module The simulated KV cache's eviction order: free cached blocks, least recently freed first, as a doubly
 * linked list over block ids in typed arrays — O(1) to append, remove anywhere and take the oldest. A Map used as
 * a queue is not: V8 leaves deleted entries as holes that every "first key" lookup walks over until the table is
 * rebuilt, so a full cache that evicts from the front slowed to milliseconds per request.
 */

const NONE = -1;

export class BlockLru {
  readonly #prev: Int32Array;
  readonly #next: Int32Array;
  readonly #member: Uint8Array;
  #head = NONE;
  #tail = NONE;
  #size = 0;

  constructor(capacity: number) {
    this.#prev = new Int32Array(capacity).fill(NONE);
    this.#next = new Int32Array(capacity).fill(NONE);
    this.#member = new Uint8Array(capacity);
  }

  get size(): number {
    return this.#size;
  }

  has(id: number): boolean {
    return this.#member[id] === 1;
  }

  /** Adds `id` as the most recent entry (moves it there if present). */
  append(id: number): void {
    if (this.#member[id] === 1) this.delete(id);
    this.#member[id] = 1;
    this.#prev[id] = this.#tail;
    this.#next[id] = NONE;
    if (this.#tail === NONE) this.#head = id;
    else this.#next[this.#tail] = id;
    this.#tail = id;
    this.#size++;
  }

  /** Removes `id` wherever it is; false when it was not there. */
  delete(id: number): boolean {
    if (this.#member[id] !== 1) return false;
    const p = this.#prev[id]!, n = this.#next[id]!;
    if (p === NONE) this.#head = n;
    else this.#next[p] = n;
    if (n === NONE) this.#tail = p;
    else this.#prev[n] = p;
    this.#member[id] = 0;
    this.#size--;
    return true;
  }

  /** Removes and returns the oldest entry (undefined when empty). */
  shift(): number | undefined {
    const id = this.#head;
    if (id === NONE) return undefined;
    this.delete(id);
    return id;
  }

  /** Entries oldest first. */
  *keys(): IterableIterator<number> {
    for (let id = this.#head; id !== NONE; id = this.#next[id]!) yield id;
  }

  clear(): void {
    for (let id = this.#head; id !== NONE;) {
      const n = this.#next[id]!;
      this.#member[id] = 0;
      id = n;
    }
    this.#head = this.#tail = NONE;
    this.#size = 0;
  }
}
