/**
 * @module A bounded string-keyed cache with two generations: O(1) hits with no reordering, and memory capped at
 * twice the generation size however many distinct keys arrive (a strict LRU would pay a delete+insert per hit).
 * A generation holds `generation` entries, or with `weigh` that much total weight (bytes, say).
 */

export class PieceCache<V> {
  #hot = new Map<string, V>();
  #cold = new Map<string, V>();
  #hotWeight = 0;
  readonly #generation: number;
  readonly #weigh: ((key: string, value: V) => number) | undefined;

  constructor(generation: number, weigh?: (key: string, value: V) => number) {
    this.#generation = Math.max(1, generation);
    this.#weigh = weigh;
  }

  get(key: string): V | undefined {
    const v = this.#hot.get(key);
    if (v !== undefined) return v;
    const c = this.#cold.get(key);
    // A key still in use survives the next rotation by moving to the hot generation.
    if (c !== undefined) this.set(key, c);
    return c;
  }

  set(key: string, value: V): void {
    const w = this.#weigh ? this.#weigh(key, value) : 1;
    // An entry heavier than a generation would flush the cache on every insert: it is not kept.
    if (w > this.#generation) return;
    if (this.#hotWeight + w > this.#generation) {
      this.#cold = this.#hot;
      this.#hot = new Map();
      this.#hotWeight = 0;
    }
    this.#hot.set(key, value);
    this.#hotWeight += w;
  }

  get size(): number {
    return this.#hot.size + this.#cold.size;
  }

  clear(): void {
    this.#hot.clear();
    this.#cold.clear();
    this.#hotWeight = 0;
  }
}
