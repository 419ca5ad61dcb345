/**
 * @module Fleet-wide in-flight prompts, so selection learns every rank's overlap with in-flight work in one walk
 * instead of one search per rank (64 ranks × a binary search each was a third of an 8k-token selection).
 *
 * Prompts sharing a first block sit in one lexicographically sorted group, each entry remembering its common prefix
 * with the entry before it. In sorted order the common prefix of a query with an entry k places away is the minimum
 * of the adjacent prefixes in between, so walking outward from the query's position yields every entry's overlap
 * with O(1) work per entry, and the walk stops where the overlap falls to zero.
 */
import { commonPrefix, compare, groupOf, lowerBound } from "./active-prompts.ts";

interface Entry {
  readonly keys: Uint32Array;
  readonly n: number;
  /** Index slot of the (worker, rank) the prompt is booked on. */
  readonly slot: number;
  /** Common leading blocks with the entry sorted just before (0 for the first). */
  lcpPrev: number;
}

export class InflightPrefixes {
  readonly #groups = new Map<number, Entry[]>();
  /** Per slot, the last query's overlap; valid where the stamp equals the query's generation. */
  readonly #shared: Int32Array;
  readonly #stamp: Int32Array;
  #generation = 0;
  #size = 0;
  /** The slots the last query credited, in the first `creditedCount` entries (each once). */
  readonly credited: Int32Array;
  creditedCount = 0;

  constructor(maxSlots: number) {
    this.#shared = new Int32Array(maxSlots);
    this.#stamp = new Int32Array(maxSlots);
    this.credited = new Int32Array(maxSlots);
  }

  /** Live prompts (with at least one block). */
  get size(): number {
    return this.#size;
  }

  add(keys: Uint32Array, n: number, slot: number): void {
    if (n === 0) return;
    const g = groupOf(keys);
    let group = this.#groups.get(g);
    if (!group) this.#groups.set(g, (group = []));
    const at = lowerBound(group, keys, n);
    const before = group[at - 1], after = group[at];
    const entry: Entry = { keys, n, slot, lcpPrev: before ? commonPrefix(before.keys, before.n, keys, n) : 0 };
    if (after) after.lcpPrev = commonPrefix(keys, n, after.keys, after.n);
    group.splice(at, 0, entry);
    this.#size++;
  }

  /** Removes the entry added with this very `keys` array; false if it is not live. */
  remove(keys: Uint32Array, n: number): boolean {
    if (n === 0) return true;
    const g = groupOf(keys);
    const group = this.#groups.get(g);
    if (!group) return false;
    let at = lowerBound(group, keys, n);
    // Equal prompts sit together; the one to drop is the one holding this buffer (its owner recycles it next).
    while (at < group.length && group[at]!.keys !== keys) {
      const e = group[at]!;
      if (e.n !== n || compare(e.keys, e.n, keys, n) !== 0) return false;
      at++;
    }
    if (at === group.length) return false;
    const gone = group[at]!;
    const after = group[at + 1];
    // The prefix shared across a removed entry is the smaller of the two on either side of it.
    if (after) after.lcpPrev = at === 0 ? 0 : Math.min(gone.lcpPrev, after.lcpPrev);
    group.splice(at, 1);
    this.#size--;
    if (group.length === 0) this.#groups.delete(g);
    return true;
  }

  /** Drops every entry of `slot` (its worker is gone, with prompts no booking will remove); returns how many. */
  removeSlot(slot: number): number {
    let removed = 0;
    for (const [g, group] of this.#groups) {
      const kept = group.filter((e) => e.slot !== slot);
      if (kept.length === group.length) continue;
      removed += group.length - kept.length;
      if (kept.length === 0) {
        this.#groups.delete(g);
        continue;
      }
      kept[0]!.lcpPrev = 0;
      for (let i = 1; i < kept.length; i++) kept[i]!.lcpPrev = commonPrefix(kept[i - 1]!.keys, kept[i - 1]!.n, kept[i]!.keys, kept[i]!.n);
      this.#groups.set(g, kept);
    }
    this.#size -= removed;
    return removed;
  }

  /** Computes, for every slot, the longest common prefix of (keys, n) with that slot's in-flight prompts. */
  query(keys: Uint32Array, n: number): void {
    if (++this.#generation === 0x7fffffff) {
      this.#stamp.fill(0);
      this.#generation = 1;
    }
    this.creditedCount = 0;
    if (n === 0) return;
    const group = this.#groups.get(groupOf(keys));
    if (!group) return;
    const at = lowerBound(group, keys, n);
    // Rightward: the first entry directly, then each step can only keep or lower the running prefix.
    let run = at < group.length ? commonPrefix(keys, n, group[at]!.keys, group[at]!.n) : 0;
    for (let j = at; j < group.length && run > 0; j++) {
      if (j > at) run = Math.min(run, group[j]!.lcpPrev);
      this.#credit(group[j]!.slot, run);
    }
    run = at > 0 ? commonPrefix(keys, n, group[at - 1]!.keys, group[at - 1]!.n) : 0;
    for (let j = at - 1; j >= 0 && run > 0; j--) {
      if (j < at - 1) run = Math.min(run, group[j + 1]!.lcpPrev);
      this.#credit(group[j]!.slot, run);
    }
  }

  /** The last query's overlap for `slot` (0 when the slot holds nothing sharing its first block). */
  sharedOf(slot: number): number {
    return this.#stamp[slot] === this.#generation ? this.#shared[slot]! : 0;
  }

  #credit(slot: number, blocks: number): void {
    if (this.#stamp[slot] !== this.#generation) {
      this.#stamp[slot] = this.#generation;
      this.#shared[slot] = blocks;
      this.credited[this.creditedCount++] = slot;
    } else if (blocks > this.#shared[slot]!) {
      this.#shared[slot] = blocks;
    }
  }
}
