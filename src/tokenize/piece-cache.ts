/**
 * @module A bounded string-keyed cache with two generations: O(1) hits with no reordering, and memory capped at
 * twice the generation size however many distinct keys arrive (a strict LRU would pay a delete+insert per hit).
 */

export class PieceCache<V> {
  #hot = new Map<string, V>();
  #cold = new Map<string, V>();
  readonly #generation: number;

  constructor(generation: number) {
    this.#generation = Math.max(1, generation);
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
    if (this.#hot.size >= this.#generation) {
      this.#cold = this.#hot;
      this.#hot = new Map();
    }
    this.#hot.set(key, value);
  }

  get size(): number {
    return this.#hot.size + this.#cold.size;
  }

  clear(): void {
    this.#hot.clear();
    this.#cold.clear();
  }
}
