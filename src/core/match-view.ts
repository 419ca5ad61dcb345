/** @module The (slot, depth) pairs a match leaves in the core's fixed output region, read in place so routing allocates nothing per request. */

/**
 * One per KvIndex, rebound by it whenever the core's memory is replaced (growth, rebuild after a trap). Valid only
 * between a match (`KvIndex.route`) and the next call into the same index.
 */
export class MatchView {
  #u32: Uint32Array = new Uint32Array(0);
  /** Start of the output region, in u32 words. */
  #at = 0;

  /** Points the view at the core's current memory; the index calls this when it refreshes its own views. */
  bind(u32: Uint32Array, outWord: number): void {
    this.#u32 = u32;
    this.#at = outWord;
  }

  /** The slot of the i-th matched (worker, rank). */
  slot(i: number): number {
    return this.#u32[this.#at + 2 * i]!;
  }

  /** How many leading blocks of the prompt the i-th matched slot holds. */
  depth(i: number): number {
    return this.#u32[this.#at + 2 * i + 1]!;
  }
}
