/**
 * @module A hot prefix's candidates in rendezvous order, cached per prefix for the kept candidate list, so choosing
 * its k workers costs O(k + holders) per request instead of hashing every candidate. pickSpreadSet is the reference
 * (and the fallback when the cached head runs out); the two pick the same set.
 */
import { rendezvousWeight } from "./tie-break.ts";

/** Positions ranked per prefix: enough for any k below it once holders are skipped. */
const DEPTH = 64;
/** Prefixes ranked at once; past it the cache starts over (hot prefixes are few). */
const MAX_PREFIXES = 1024;

interface Ranking {
  lo: number;
  hi: number;
  /** The first DEPTH positions (fewer for a short list) by rendezvous weight, descending; equal weights by position. */
  order: Int32Array;
}

export class SpreadRankings {
  #list: readonly unknown[] | undefined;
  #n = 0;
  readonly #byPrefix = new Map<number, Ranking>();
  readonly #isHeld: Uint8Array;
  readonly #weights: Float64Array;

  constructor(maxSlots: number) {
    this.#isHeld = new Uint8Array(maxSlots);
    this.#weights = new Float64Array(maxSlots);
  }

  /**
   * The same set as pickSpreadSet(n, k, lo, hi, …) into out[0, k), ascending, where the candidates holding the prefix
   * are `held[0, heldCount)` (distinct positions) and `keys[i]` is position i's rendezvous key. `list` identifies the
   * candidate list (rankings are dropped when it changes); `prefix` is prefixKeyOf(lo, hi). False when the cached
   * ranking is too short for this request: the caller runs pickSpreadSet.
   */
  pick(list: readonly unknown[], n: number, k: number, lo: number, hi: number, prefix: number, held: Int32Array,
    heldCount: number, keys: ArrayLike<number>, out: Int32Array): boolean {
    if (list !== this.#list || n !== this.#n) {
      this.#byPrefix.clear();
      this.#list = list;
      this.#n = n;
    }
    const w = this.#weights, isHeld = this.#isHeld;
    // Holders first (any holder outweighs every other candidate), heaviest first, by insertion into out.
    let m = 0;
    for (let h = 0; h < heldCount; h++) {
      const i = held[h]!, wi = rendezvousWeight(lo, hi, keys[i]!);
      isHeld[i] = 1;
      if (m === k && !heavier(wi, i, w[k - 1]!, out[k - 1]!)) continue;
      let j = m < k ? m++ : k - 1;
      while (j > 0 && heavier(wi, i, w[j - 1]!, out[j - 1]!)) {
        out[j] = out[j - 1]!;
        w[j] = w[j - 1]!;
        j--;
      }
      out[j] = i;
      w[j] = wi;
    }
    let ok = true;
    if (m < k) {
      const order = this.#ranking(n, lo, hi, prefix, keys).order;
      for (let r = 0; r < order.length && m < k; r++) if (isHeld[order[r]!] === 0) out[m++] = order[r]!;
      ok = m === k;
    }
    for (let h = 0; h < heldCount; h++) isHeld[held[h]!] = 0;
    if (!ok) return false;
    for (let a = 1; a < k; a++) {
      const v = out[a]!;
      let b = a;
      while (b > 0 && out[b - 1]! > v) {
        out[b] = out[b - 1]!;
        b--;
      }
      out[b] = v;
    }
    return true;
  }

  #ranking(n: number, lo: number, hi: number, prefix: number, keys: ArrayLike<number>): Ranking {
    const cached = this.#byPrefix.get(prefix);
    if (cached !== undefined && cached.lo === lo && cached.hi === hi) return cached;
    const weights = new Float64Array(n);
    for (let i = 0; i < n; i++) weights[i] = rendezvousWeight(lo, hi, keys[i]!);
    const all = new Int32Array(n);
    for (let i = 0; i < n; i++) all[i] = i;
    all.sort((a, b) => weights[b]! - weights[a]! || a - b);
    const ranking = { lo, hi, order: all.slice(0, Math.min(n, DEPTH)) };
    if (this.#byPrefix.size >= MAX_PREFIXES) this.#byPrefix.clear();
    this.#byPrefix.set(prefix, ranking);
    return ranking;
  }
}

/** Weight order with pickSpreadSet's tie rule: the lower position wins an equal weight. */
function heavier(w: number, i: number, wOther: number, iOther: number): boolean {
  return w > wOther || (w === wOther && i < iOther);
}
