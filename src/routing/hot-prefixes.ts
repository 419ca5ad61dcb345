/**
 * @module Hot-prefix spreading: how many workers a prompt prefix should be served from, grown and shrunk with that
 * prefix's share of the fleet's booked work, so a popular system prompt settles on k workers instead of swinging
 * between its cache owner and whichever worker is least loaded (and being prefilled again there each time).
 */
import { rendezvousWeight } from "./tie-break.ts";

export interface HotPrefixOptions {
  /** Half-life of the decayed demand figures (router clock ms). */
  halfLifeMs: number;
  /**
   * Share of one worker's fair part of the fleet's work a prefix may take before it gets another worker: k is the
   * smallest count with share × candidates / k ≤ this.
   */
  perWorkerShare: number;
  /** Decayed requests a prefix needs before it is spread at all (one huge prompt is not a hot prefix). */
  minRequests: number;
  /** Prefixes tracked; the stalest are forgotten first beyond it. */
  maxEntries: number;
}

export const HOT_PREFIX_DEFAULTS: HotPrefixOptions = { halfLifeMs: 30_000, perWorkerShare: 0.8, minRequests: 8, maxEntries: 4096 };

interface Entry {
  /** Decayed booked blocks and requests, as of `at`. */
  blocks: number;
  requests: number;
  at: number;
  /** Workers currently serving the prefix (1 = not spread). */
  k: number;
}

/** The prefix identity: the first block's 64-bit sequence hash folded to 32 bits (a collision only merges demand). */
export function prefixKeyOf(lo: number, hi: number): number {
  return (lo ^ Math.imul(hi, 0x9e3779b1)) >>> 0;
}

export class HotPrefixes {
  readonly #entries = new Map<number, Entry>();
  readonly #o: HotPrefixOptions;
  readonly #lambda: number;
  #totalBlocks = 0;
  #totalAt = 0;
  /** Decisions restricted to a hot prefix's workers (for the metric). */
  spreadDecisions = 0;

  constructor(private readonly now: () => number, options: Partial<HotPrefixOptions> = {}) {
    this.#o = { ...HOT_PREFIX_DEFAULTS, ...options };
    this.#lambda = Math.LN2 / Math.max(1, this.#o.halfLifeMs);
  }

  /** Records a booking of `blocks` KV blocks (prompt and expected output) under its prefix. */
  observe(key: number, blocks: number): void {
    const t = this.now();
    this.#totalBlocks = this.#totalBlocks * this.#decay(t - this.#totalAt) + blocks;
    this.#totalAt = t;
    let e = this.#entries.get(key);
    if (e === undefined) {
      if (this.#entries.size >= this.#o.maxEntries) this.#evict(t);
      e = { blocks: 0, requests: 0, at: t, k: 1 };
      this.#entries.set(key, e);
    }
    const d = this.#decay(t - e.at);
    e.blocks = e.blocks * d + blocks;
    e.requests = e.requests * d + 1;
    e.at = t;
  }

  /**
   * Workers the prefix should be served from among `n` candidates (n = no restriction). Grows at once when the
   * prefix's share needs more; shrinks one worker at a time, only once the share is a quarter worker below the
   * smaller count, so a share near a boundary does not flap.
   */
  workersFor(key: number, n: number): number {
    const e = this.#entries.get(key);
    if (e === undefined || n < 2) return n;
    const t = this.now();
    const d = this.#decay(t - e.at);
    if (e.requests * d < this.#o.minRequests) return n;
    const total = this.#totalBlocks * this.#decay(t - this.#totalAt);
    if (total <= 0) return n;
    const need = ((e.blocks * d) / total) * n / this.#o.perWorkerShare;
    const want = Math.max(1, Math.ceil(need - 1e-9));
    if (want > e.k) e.k = want;
    else if (want < e.k && need < e.k - 1.25) e.k--;
    return Math.min(n, e.k);
  }

  /** Prefixes currently spread over at least two workers (and fewer than all). */
  spreadCount(): number {
    let c = 0;
    for (const e of this.#entries.values()) if (e.k >= 2) c++;
    return c;
  }

  get size(): number {
    return this.#entries.size;
  }

  #decay(dt: number): number {
    return dt > 0 ? Math.exp(-this.#lambda * dt) : 1;
  }

  /** Forgets prefixes with under one decayed request, else the oldest-inserted eighth. */
  #evict(t: number): void {
    const target = Math.floor((this.#o.maxEntries * 7) / 8);
    for (const [k, e] of this.#entries) {
      if (e.requests * this.#decay(t - e.at) < 1) this.#entries.delete(k);
    }
    for (const k of this.#entries.keys()) {
      if (this.#entries.size <= target) break;
      this.#entries.delete(k);
    }
  }
}

/**
 * Picks the `k` of `n` candidates a hot prefix is served from into `out` (indices, ascending): those already
 * holding the prefix first (no one pays its prefill again), then by rendezvous weight of the prefix on the rank,
 * so every replica picks the same workers. Candidate i holds the prefix when `held[heldAt + i]` > 0 (the overlap
 * column the kernel read); `keys[i]` is its rendezvous key. Equal weights (a 32-bit hash collision) keep the lower
 * index. Returns the count written (k).
 */
export function pickSpreadSet(n: number, k: number, lo: number, hi: number, held: Float64Array, heldAt: number,
  keys: ArrayLike<number>, out: Int32Array, weights: Float64Array): number {
  for (let i = 0; i < n; i++) weights[i] = (held[heldAt + i]! > 0 ? 4294967296 : 0) + rendezvousWeight(lo, hi, keys[i]!);
  if (k <= 32) {
    // The k heaviest by insertion into a sorted run: a candidate beats the lightest kept only ~k·ln(n/k) times.
    let m = 0;
    for (let i = 0; i < n; i++) {
      const w = weights[i]!;
      if (m === k && w <= weights[out[k - 1]!]!) continue;
      let j = m < k ? m++ : k - 1;
      while (j > 0 && weights[out[j - 1]!]! < w) {
        out[j] = out[j - 1]!;
        j--;
      }
      out[j] = i;
    }
  } else {
    const all = out.subarray(0, n);
    for (let i = 0; i < n; i++) all[i] = i;
    all.sort((a, b) => weights[b]! - weights[a]! || a - b);
  }
  out.subarray(0, k).sort();
  return k;
}
