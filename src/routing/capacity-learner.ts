/**
 * @module Approximate mode's learnt cache size per rank. kvgate models each approximate rank's cache as an LRU of
 * the blocks it routed there (the core's slot capacity); a response whose engine-reported hit falls a block short of
 * the model's prediction says the capacity is too large, one that beats it says too small. Steps grow while the
 * evidence keeps pointing one way, so a cache a quarter of the declared size is found within a few dozen responses,
 * and fall back to the smallest once it turns, so the estimate settles on the engine's real eviction point.
 */

export interface CapacityConfig {
  /** Relative step after a change of direction (and the first). */
  minStep: number;
  /** Largest relative step, reached after consecutive moves the same way. */
  maxStep: number;
  /** Factor a step grows by on each further move in the same direction. */
  growth: number;
  /** Floor of a learnt capacity, in blocks. */
  minBlocks: number;
  /**
   * Share of a declared size a rank starts from: an engine's cache also holds the blocks of the answers it generates,
   * which kvgate never sees, so fewer of the prompt blocks it routed fit than the engine has blocks.
   */
  declaredShare: number;
}

export const CAPACITY_DEFAULTS: CapacityConfig = { minStep: 0.02, maxStep: 0.25, growth: 1.5, minBlocks: 16, declaredShare: 0.95 };

interface RankCapacity {
  blocks: number;
  /** Ceiling: twice the declared size (a real cache is no larger than its engine's blocks), else unbounded. */
  maxBlocks: number;
  step: number;
  dir: -1 | 0 | 1;
  moves: number;
}

export interface CapacitySnapshot {
  blocks: number;
  moves: number;
}

export class CapacityLearner {
  readonly #ranks = new Map<string, RankCapacity>();
  readonly config: CapacityConfig;

  constructor(config: Partial<CapacityConfig> = {}) {
    this.config = { ...CAPACITY_DEFAULTS, ...config };
    const c = this.config;
    if (!(c.minStep > 0 && c.minStep <= c.maxStep && c.maxStep < 1)) throw new RangeError("need 0 < minStep <= maxStep < 1");
    if (!(c.growth >= 1)) throw new RangeError("growth must be at least 1");
    if (!(c.declaredShare > 0 && c.declaredShare <= 1)) throw new RangeError("declaredShare must be in (0, 1]");
  }

  /** A rank starts from the size its worker declares; a rank already learning keeps what it learnt. */
  start(key: string, declaredBlocks: number): number {
    const have = this.#ranks.get(key);
    if (have) return have.blocks;
    const blocks = Math.max(this.config.minBlocks, Math.round(declaredBlocks * this.config.declaredShare));
    this.#ranks.set(key, { blocks, maxBlocks: Math.max(blocks, 2 * Math.round(declaredBlocks)), step: this.config.minStep, dir: 0, moves: 0 });
    return blocks;
  }

  blocksOf(key: string): number | undefined {
    return this.#ranks.get(key)?.blocks;
  }

  /**
   * One response: `predicted` and `reported` cached tokens. Returns the new capacity when it moved. A rank with no
   * capacity yet starts, on its first shortfall, from what the model held then (`held`): the engine had less.
   * `bound`: at most how many blocks the engine can hold, as this shortfall shows (recency-bound.ts); the capacity
   * drops to it at once, though never below half of what it was, so one answer that misled cannot empty the model.
   */
  observe(key: string, predicted: number, reported: number, blockSize: number, held: () => number, bound?: number): number | undefined {
    const dir = reported <= predicted - blockSize ? -1 : reported >= predicted + blockSize ? 1 : 0;
    if (dir === 0) return undefined;
    let s = this.#ranks.get(key);
    if (!s) {
      if (dir > 0) return undefined;
      const h = held();
      if (!(h > this.config.minBlocks)) return undefined;
      s = { blocks: h, maxBlocks: Number.MAX_SAFE_INTEGER, step: this.config.minStep, dir: 0, moves: 0 };
      this.#ranks.set(key, s);
    }
    s.step = s.dir === dir ? Math.min(this.config.maxStep, s.step * this.config.growth) : this.config.minStep;
    s.dir = dir;
    let next = Math.round(Math.min(s.maxBlocks, Math.max(this.config.minBlocks, s.blocks * (1 + dir * s.step))));
    if (dir < 0 && bound !== undefined && bound < next) next = Math.max(this.config.minBlocks, Math.round(bound), Math.ceil(s.blocks / 4));
    if (next === s.blocks) return undefined;
    s.blocks = next;
    s.moves++;
    return next;
  }

  snapshot(key: string): CapacitySnapshot | undefined {
    const s = this.#ranks.get(key);
    return s && { blocks: s.blocks, moves: s.moves };
  }

  forget(key: string): void {
    this.#ranks.delete(key);
  }
}
