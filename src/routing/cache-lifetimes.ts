/**
 * @module Places new prefill where blocks live longest. One pooled LRU cache (the ceiling the replay reports) keeps
 * every block for the same time; a fleet keeps a block on rank w for about capacity_w ÷ inflow_w. A rank whose
 * lifetime falls well below the fleet's (a smaller cache, or more new content than its share) forgets prompts before
 * their next turn, so the selector charges new blocks there extra until the lifetimes even out.
 */

export interface LifetimeConfig {
  /** A rank whose lifetime is at least this share of the fleet's pays nothing (noise in the inflows stays free). */
  freeShare: number;
  /** Largest extra charge per new block, as a share of what the block already costs. */
  maxPenalty: number;
  /** Inflow is remembered over this many fleet capacities of new blocks (exponential decay). */
  memory: number;
  /** No charge until the fleet has taken this many capacities of new blocks: before that nothing was evicted. */
  warmup: number;
}

export const LIFETIME_DEFAULTS: LifetimeConfig = { freeShare: 0.75, maxPenalty: 1, memory: 1, warmup: 0.5 };

/** Rescale the decayed sums before their growing weight leaves the range of a double. */
const RESCALE_AT = 1e200;

export class CacheLifetimes {
  /** Per index slot: the extra charge on each new block (0 … maxPenalty), what the selector reads. */
  readonly penalty: Float64Array;
  readonly config: LifetimeConfig;
  readonly #capacity: Float64Array;
  /** Per slot, new blocks routed there, each weighted by #weight at the time (a decay that touches one slot a call). */
  readonly #inflow: Float64Array;
  readonly #slots = new Set<number>();
  #weight = 1;
  #inflowSum = 0;
  #capacitySum = 0;
  /** New blocks routed to ranks with a capacity since the start, undecayed (the warm-up gate). */
  #seen = 0;

  constructor(maxSlots: number, config: Partial<LifetimeConfig> = {}) {
    this.config = { ...LIFETIME_DEFAULTS, ...config };
    const c = this.config;
    if (!(c.freeShare > 0 && c.freeShare <= 1)) throw new RangeError("freeShare must be in (0, 1]");
    if (!(c.maxPenalty >= 0) || !(c.memory > 0) || !(c.warmup >= 0)) throw new RangeError("maxPenalty, memory and warmup must be positive");
    this.penalty = new Float64Array(maxSlots);
    this.#capacity = new Float64Array(maxSlots);
    this.#inflow = new Float64Array(maxSlots);
  }

  /** The rank's cache size in blocks (declared, or learnt by the closed loop); 0 or less takes it out. */
  setCapacity(slot: number, blocks: number): void {
    const b = blocks > 0 && Number.isFinite(blocks) ? blocks : 0;
    this.#capacitySum += b - this.#capacity[slot]!;
    this.#capacity[slot] = b;
    if (b > 0) this.#slots.add(slot);
    else this.forget(slot);
    this.#recompute();
  }

  capacityOf(slot: number): number {
    return this.#capacity[slot]!;
  }

  /** The rank left or its cache was emptied: its inflow no longer describes anything. */
  forget(slot: number): void {
    this.#capacitySum -= this.#capacity[slot]!;
    this.#inflowSum -= this.#inflow[slot]!;
    this.#capacity[slot] = 0;
    this.#inflow[slot] = 0;
    this.penalty[slot] = 0;
    this.#slots.delete(slot);
    if (this.#slots.size === 0) this.#capacitySum = this.#inflowSum = 0;
    this.#recompute();
  }

  /** A booking put `newBlocks` blocks the rank did not cache (by the prediction) on it. */
  routed(slot: number, newBlocks: number): void {
    if (!(newBlocks > 0) || this.#capacity[slot]! <= 0) return;
    this.#seen += newBlocks;
    // Older inflow fades by e^(-b / (memory × capacity)): the same as growing the weight of what comes now.
    this.#weight *= Math.exp(newBlocks / (this.config.memory * this.#capacitySum));
    const add = newBlocks * this.#weight;
    this.#inflow[slot] = this.#inflow[slot]! + add;
    this.#inflowSum += add;
    if (this.#weight > RESCALE_AT) this.#rescale();
    this.#recompute();
  }

  /** A rank's lifetime over the fleet's (pooled) one; Infinity when nothing new went there lately. */
  lifetimeShare(slot: number): number {
    const cap = this.#capacity[slot]!, inflow = this.#inflow[slot]!;
    if (cap <= 0 || this.#inflowSum <= 0) return 1;
    if (inflow <= 0) return Infinity;
    return (cap * this.#inflowSum) / (inflow * this.#capacitySum);
  }

  #recompute(): void {
    const { freeShare, maxPenalty, warmup } = this.config;
    const warm = this.#seen >= warmup * this.#capacitySum && this.#slots.size > 1;
    for (const slot of this.#slots) {
      const share = warm ? this.lifetimeShare(slot) : Infinity;
      this.penalty[slot] = share >= freeShare ? 0 : Math.min(maxPenalty, maxPenalty * (1 - share / freeShare));
    }
  }

  #rescale(): void {
    const w = this.#weight;
    this.#inflowSum = 0;
    for (const slot of this.#slots) {
      this.#inflow[slot] = this.#inflow[slot]! / w;
      this.#inflowSum += this.#inflow[slot]!;
    }
    this.#weight = 1;
  }
}
