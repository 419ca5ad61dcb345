/**
 * @module Plain TypeScript model of the block index, slot-keyed like the WASM core: readable maps, no tricks.
 * It defines the semantics the core must reproduce and is the oracle of the differential tests and the benchmark baseline.
 */
import { xxh3Reference } from "./xxh3-reference.ts";
import { BASE_SEED } from "../core/hash-seeds.ts";
import { NEED_NEVER as NEVER } from "../wasm/abi.ts";

export interface RefEntry {
  /** The prefix (router sequence hash) this engine block stands for. */
  seq: bigint;
  /** Approximate-mode expiry in ms; 0 for blocks an engine event reported. */
  expiry: number;
  /** Position in its prompt (0 = first block); deeper blocks are pruned first on equal expiry. */
  depth: number;
}

export type RefStoreOutcome = "applied" | "bad_slot" | "parent_not_found" | "invalid_sequence" | "capacity";

export interface RefCounters {
  applied: number;
  parentMissing: number;
  invalid: number;
  capacity: number;
  unknownRemoved: number;
  badSlot: number;
  evicted: number;
  expired: number;
  pruned: number;
  capped: number;
}

export function chainStep(prev: bigint, local: bigint): bigint {
  const b = new Uint8Array(16);
  const v = new DataView(b.buffer);
  v.setBigUint64(0, prev, true);
  v.setBigUint64(8, local, true);
  return xxh3Reference(b, BASE_SEED);
}

const M64 = (1n << 64n) - 1n;

/** splitmix64's finalizer, as the core's index digest mixes each entry. */
export function fmix64(x: bigint): bigint {
  x = ((x ^ (x >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  x = ((x ^ (x >> 27n)) * 0x94d049bb133111ebn) & M64;
  return x ^ (x >> 31n);
}

export class ReferenceIndex {
  readonly open = new Set<number>();
  /** slot → engine hash → entry */
  readonly entries = new Map<number, Map<bigint, RefEntry>>();
  /** slot → prefix → number of entries of that slot standing for it */
  readonly holds = new Map<number, Map<bigint, number>>();
  readonly counters: RefCounters = { applied: 0, parentMissing: 0, invalid: 0, capacity: 0, unknownRemoved: 0, badSlot: 0, evicted: 0, expired: 0, pruned: 0, capped: 0 };
  /** slot → engine hashes of its timed entries, least recently routed first (a Map iterates in insertion order). */
  readonly recency = new Map<number, Map<bigint, true>>();
  /** slot → most timed entries it keeps (absent: no bound but the TTLs). */
  readonly capacities = new Map<number, number>();
  /** slot → blocks touched by recorded prompts (u32, wrapping); kept while the slot is closed, as the core does. */
  readonly clocks = new Map<number, number>();
  /** slot → engine hash → the slot's clock when its timed entry was last touched. */
  readonly stamps = new Map<number, Map<bigint, number>>();
  /** The last record's per-block needs (NEEDS in docs/abi.md). */
  lastNeeds: number[] = [];
  size = 0;
  ttlCount = 0;

  constructor(
    readonly capacity: number,
    readonly approxMax = 1 << 20,
    readonly pruneRatio = 0.8,
  ) {}

  openSlot(slot: number): void {
    this.open.add(slot);
    this.capacities.delete(slot);
    if (!this.entries.has(slot)) {
      this.entries.set(slot, new Map());
      this.holds.set(slot, new Map());
      this.recency.set(slot, new Map());
      this.stamps.set(slot, new Map());
    }
  }

  treeSize(slot: number): number {
    return this.entries.get(slot)?.size ?? 0;
  }

  /** The slot's entry count and order-independent digest: wrapping sum of fmix(hash ^ fmix(prefix)) (index-digest.ts). */
  digest(slot: number): { blocks: number; digest: bigint } {
    let sum = 0n;
    const m = this.entries.get(slot) ?? new Map<bigint, RefEntry>();
    for (const [hash, e] of m) sum = (sum + fmix64(hash ^ fmix64(e.seq))) & M64;
    return { blocks: m.size, digest: sum };
  }

  #create(slot: number, hash: bigint, e: RefEntry): void {
    this.entries.get(slot)!.set(hash, e);
    const h = this.holds.get(slot)!;
    h.set(e.seq, (h.get(e.seq) ?? 0) + 1);
    this.size++;
    if (e.expiry > 0) {
      this.ttlCount++;
      this.recency.get(slot)!.set(hash, true);
      this.stamps.get(slot)!.set(hash, this.clocks.get(slot) ?? 0);
    }
  }

  #drop(slot: number, hash: bigint): void {
    const m = this.entries.get(slot)!;
    const e = m.get(hash)!;
    m.delete(hash);
    const h = this.holds.get(slot)!;
    const c = h.get(e.seq)! - 1;
    if (c === 0) h.delete(e.seq);
    else h.set(e.seq, c);
    this.size--;
    if (e.expiry > 0) {
      this.ttlCount--;
      this.recency.get(slot)!.delete(hash);
    }
  }

  /** Live approximate entries in eviction order: earliest expiry, then deepest, then slot, then hash. */
  #ttlOrder(): [number, bigint, RefEntry][] {
    const all: [number, bigint, RefEntry][] = [];
    for (const [slot, m] of this.entries) for (const [hash, e] of m) if (e.expiry > 0) all.push([slot, hash, e]);
    return all.sort((a, b) => a[2].expiry - b[2].expiry || b[2].depth - a[2].depth || a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  }

  #evictOldest(count: number): number {
    const order = this.#ttlOrder();
    let n = 0;
    for (const [slot, hash] of order) {
      if (n >= count) break;
      this.#drop(slot, hash);
      n++;
    }
    return n;
  }

  store(slot: number, parent: bigint | null, blocks: readonly { hash: bigint; local: bigint }[]): RefStoreOutcome {
    if (!this.open.has(slot)) { this.counters.badSlot++; return "bad_slot"; }
    const mine = this.entries.get(slot)!;
    let prev = 0n, depth = 0;
    if (parent !== null) {
      const p = mine.get(parent);
      if (!p) { this.counters.parentMissing++; return "parent_not_found"; }
      prev = p.seq;
      depth = p.depth + 1;
    }
    const seen = new Set<bigint>();
    for (const b of blocks) {
      if ((parent !== null && b.hash === parent) || seen.has(b.hash)) { this.counters.invalid++; return "invalid_sequence"; }
      seen.add(b.hash);
    }
    if (this.capacity - this.size < blocks.length) {
      const evicted = this.#evictOldest(blocks.length - (this.capacity - this.size));
      this.counters.evicted += evicted;
      if (parent !== null && !mine.has(parent)) { this.counters.parentMissing++; return "parent_not_found"; }
      const missing = blocks.filter((b) => !mine.has(b.hash)).length;
      if (this.capacity - this.size < missing) { this.counters.capacity++; return "capacity"; }
    }
    blocks.forEach((b, i) => {
      const seq = parent === null && i === 0 ? b.local : chainStep(prev, b.local);
      prev = seq;
      const e = mine.get(b.hash);
      if (e && e.seq === seq) {
        if (e.expiry > 0) { e.expiry = 0; this.ttlCount--; this.recency.get(slot)!.delete(b.hash); }
        e.depth = depth + i;
        return;
      }
      if (e) this.#drop(slot, b.hash);
      this.#create(slot, b.hash, { seq, expiry: 0, depth: depth + i });
    });
    this.counters.applied++;
    return "applied";
  }

  /** Returns how many hashes were unknown, or -1 for a closed slot. */
  remove(slot: number, hashes: readonly bigint[]): number {
    if (!this.open.has(slot)) { this.counters.badSlot++; return -1; }
    let unknown = 0;
    for (const h of hashes) {
      if (this.entries.get(slot)!.has(h)) this.#drop(slot, h);
      else unknown++;
    }
    this.counters.unknownRemoved += unknown;
    this.counters.applied++;
    return unknown;
  }

  clear(slot: number): boolean {
    if (!this.open.has(slot)) { this.counters.badSlot++; return false; }
    for (const h of [...this.entries.get(slot)!.keys()]) this.#drop(slot, h);
    this.counters.applied++;
    return true;
  }

  closeSlot(slot: number): void {
    if (this.clear(slot)) {
      this.open.delete(slot);
      this.capacities.delete(slot);
    }
  }

  /** Approximate mode: the slot keeps at most `capacity` timed entries (0: no bound); returns entries dropped. */
  setCapacity(slot: number, capacity: number): number {
    if (!this.open.has(slot)) { this.counters.badSlot++; return -1; }
    if (capacity > 0) this.capacities.set(slot, capacity);
    else this.capacities.delete(slot);
    return this.#enforceCapacity(slot);
  }

  #enforceCapacity(slot: number): number {
    const cap = this.capacities.get(slot);
    if (cap === undefined) return 0;
    const order = this.recency.get(slot)!;
    let n = 0;
    while (order.size > cap) {
      this.#drop(slot, order.keys().next().value!);
      n++;
    }
    this.counters.capped += n;
    return n;
  }

  expire(now: number): number {
    let n = 0;
    for (const [slot, m] of this.entries) {
      for (const [hash, e] of [...m]) {
        if (e.expiry > 0 && e.expiry <= now) {
          this.#drop(slot, hash);
          n++;
        }
      }
    }
    this.counters.expired += n;
    return n;
  }

  #prune(): void {
    if (this.ttlCount <= this.approxMax) return;
    const target = Math.floor(this.approxMax * this.pruneRatio);
    const n = this.#evictOldest(this.ttlCount - target);
    this.counters.pruned += n;
  }

  /** Approximate mode: `seqs` (prompt order) were routed to `slot` at `now`; returns blocks recorded, or -1. */
  record(slot: number, seqs: readonly bigint[], now: number, ttl: number): number {
    if (!this.open.has(slot)) { this.counters.badSlot++; return -1; }
    this.expire(now);
    const mine = this.entries.get(slot)!;
    const clock = this.clocks.get(slot) ?? 0;
    const stamps = this.stamps.get(slot)!;
    const needs: number[] = (this.lastNeeds = []);
    let need = 0;
    let done = 0;
    for (let i = 0; i < seqs.length; i++) {
      const seq = seqs[i]!;
      let e = mine.get(seq);
      if (e && e.seq !== seq) {
        this.#drop(slot, seq);
        e = undefined;
      }
      if (!e) need = NEVER;
      else if (e.expiry > 0) need = Math.max(need, (clock - stamps.get(seq)!) >>> 0);
      needs.push(need);
      if (e) {
        if (e.expiry > 0) {
          e.expiry = now + ttl;
          e.depth = i;
        }
        done++;
        continue;
      }
      if (this.size >= this.capacity) this.counters.evicted += this.#evictOldest(1);
      if (this.size >= this.capacity) {
        this.counters.capacity++;
        while (needs.length < seqs.length) needs.push(NEVER);
        break;
      }
      this.#create(slot, seq, { seq, expiry: now + ttl, depth: i });
      done++;
      this.#prune();
    }
    // The engine's LRU after the request: its first block most recent, its deepest the first to go.
    const order = this.recency.get(slot)!;
    for (let i = seqs.length - 1; i >= 0; i--) {
      const e = mine.get(seqs[i]!);
      if (!e || e.seq !== seqs[i] || e.expiry === 0) continue;
      order.delete(seqs[i]!);
      order.set(seqs[i]!, true);
      const tick = ((this.clocks.get(slot) ?? 0) + 1) >>> 0;
      this.clocks.set(slot, tick);
      stamps.set(seqs[i]!, tick);
    }
    this.#enforceCapacity(slot);
    return done;
  }

  /**
   * Leading blocks of `seqs` each open slot holds (slots holding none are absent). With `jump` 1 every block is
   * checked. With a larger jump the match looks at blocks jump apart and accepts the run between two of them for
   * every slot still matching while all of those hold the later one; where any does not, that run is checked block
   * by block. A slot with a hole inside an accepted run is matched past it (the WASM core's match_jump).
   */
  findMatches(seqs: readonly bigint[], jump = 1): Map<number, number> {
    const out = new Map<number, number>();
    const holds = (slot: number, i: number): boolean => (this.holds.get(slot)!.get(seqs[i]!) ?? 0) > 0;
    let active = [...this.holds.keys()].filter((slot) => seqs.length > 0 && holds(slot, 0));
    const drop = (i: number): void => {
      active = active.filter((slot) => holds(slot, i) || (out.set(slot, i), false));
    };
    let p = 0;
    while (p < seqs.length - 1 && active.length > 0) {
      const q = Math.min(p + jump, seqs.length - 1);
      if (!active.every((slot) => holds(slot, q))) for (let i = p + 1; i <= q; i++) drop(i);
      p = q;
    }
    for (const slot of active) out.set(slot, seqs.length);
    return out;
  }
}
