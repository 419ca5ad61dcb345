/**
 * @module The in-flight prompts of one rank and how many distinct blocks they hold together, by sequence hash —
 * without touching every block. Booking an 8k-token prompt costs O(log k · log n) comparisons instead of 512
 * hash-table updates.
 *
 * Why it works: a sequence hash chains every block before it, so two prompts agree at block i exactly when they agree
 * on blocks 0..i (hash collisions aside). The distinct blocks of a set of prompts are therefore the nodes of their
 * prefix trie, and adding or removing a prompt of n blocks changes that count by n − (longest common prefix with the
 * others). In lexicographic order the longest common prefix with a set is reached at a sorted neighbour, and a common
 * prefix is found by binary search over block positions.
 */

/** One prompt: `n` sequence hashes as interleaved (lo, hi) u32 pairs. */
export interface Prompt {
  readonly keys: Uint32Array;
  readonly n: number;
}

/** Common leading blocks of a and b: equality is monotone along chained hashes, so binary search finds the edge. */
export function commonPrefix(a: Uint32Array, na: number, b: Uint32Array, nb: number): number {
  let lo = 0, hi = Math.min(na, nb);
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[2 * mid] === b[2 * mid] && a[2 * mid + 1] === b[2 * mid + 1]) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Lexicographic order on block hashes (hi word, then lo word, unsigned); a prefix sorts first. */
export function compare(a: Uint32Array, na: number, b: Uint32Array, nb: number): number {
  const l = commonPrefix(a, na, b, nb);
  if (l === na || l === nb) return na - nb;
  return a[2 * l + 1]! - b[2 * l + 1]! || a[2 * l]! - b[2 * l]!;
}

export class ActivePrompts {
  /**
   * Prompts grouped by 30 bits of their first block's hash (prompts with different first blocks share nothing; a rare
   * shared group is still exact, just longer), each group sorted. 30 bits keep the Map key a small integer in V8.
   */
  readonly #groups = new Map<number, Prompt[]>();
  #distinct = 0;
  #count = 0;

  /** Distinct blocks over all live prompts. */
  get distinctBlocks(): number {
    return this.#distinct;
  }

  /** Live prompts (with at least one block). */
  get size(): number {
    return this.#count;
  }

  add(keys: Uint32Array, n: number): void {
    if (n === 0) return;
    let group = this.#groups.get(groupOf(keys));
    if (!group) this.#groups.set(groupOf(keys), (group = []));
    const at = lowerBound(group, keys, n);
    this.#distinct += n - neighbourPrefix(group, at, keys, n);
    group.splice(at, 0, { keys, n });
    this.#count++;
  }

  /** Removes one live prompt with these blocks (the entry added with this very array when there is one); false if none is live. */
  remove(keys: Uint32Array, n: number): boolean {
    if (n === 0) return true;
    const group = this.#groups.get(groupOf(keys));
    if (!group) return false;
    let at = lowerBound(group, keys, n);
    const first = group[at];
    if (!first || compare(first.keys, first.n, keys, n) !== 0) return false;
    // Equal prompts are interchangeable for the count, but their key buffers are not: the caller recycles its buffer
    // after removal, so the entry that goes must be the one holding that very buffer (equal prompts sit together).
    for (let i = at; i < group.length && group[i]!.n === n && compare(group[i]!.keys, n, keys, n) === 0; i++) {
      if (group[i]!.keys === keys) {
        at = i;
        break;
      }
    }
    group.splice(at, 1);
    this.#distinct -= n - neighbourPrefix(group, at, keys, n);
    this.#count--;
    if (group.length === 0) this.#groups.delete(groupOf(keys));
    return true;
  }
}

/** Prompts with different first blocks share nothing: 30 bits of the first hash (a small-integer Map key in V8). */
export function groupOf(keys: Uint32Array): number {
  return keys[0]! & 0x3fffffff;
}

/** First index whose prompt does not sort before (keys, n). */
export function lowerBound(group: readonly Prompt[], keys: Uint32Array, n: number): number {
  let lo = 0, hi = group.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const p = group[mid]!;
    if (compare(p.keys, p.n, keys, n) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Longest common prefix of (keys, n) with the prompts just before and at position `at` of a sorted group. */
function neighbourPrefix(group: readonly Prompt[], at: number, keys: Uint32Array, n: number): number {
  let best = 0;
  const before = group[at - 1], after = group[at];
  if (before) best = commonPrefix(before.keys, before.n, keys, n);
  if (after) best = Math.max(best, commonPrefix(after.keys, after.n, keys, n));
  return best;
}
