/**
 * @module Picks a (worker, rank) for one prompt: hash and match in WASM, join the overlaps with live load, score with
 * the core's cost function. Books nothing; the hot path, so it avoids per-request allocation where it can.
 */
import { KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import { scoreCandidates, type ScoreCandidate } from "../core/score-kernel.ts";
import type { NowFn } from "./clock.ts";
import type { RandomSource } from "./prng.ts";
import type { RouteRequest } from "./routing-types.ts";
import type { RankState } from "./worker-registry.ts";

export interface SelectParams {
  /** Non-empty; when `pinned` is set it is the only rank considered. */
  candidates: readonly RankState[];
  /** Chosen without scoring (explicit target, hard session, plan, or an eligible soft preference). */
  pinned?: RankState;
  overlapWeight: number;
  temperature: number;
  /** Whether block keys are needed afterwards (booking with KV reuse assumed). */
  willBook: boolean;
  assumeKvReuse: boolean;
}

export interface Selection {
  rank: RankState;
  isl: number;
  blockSize: number;
  promptBlocks: number;
  overlapBlocks: number;
  bestOverlapBlocks: number;
  cachedTokens: number;
  cost: number;
  potentialPrefillTokens: number;
  potentialDecodeBlocks: number;
  /** Sequence hashes as (lo, hi) u32 pairs, when read. */
  keys: Uint32Array | undefined;
  hashMatchMs: number;
  /** Fine-timer reading when matching ended; scheduling time is measured from here to the end of booking. */
  matchedAt: number;
}

export class Selector {
  /** Overlap per index slot for the current request; valid only where stamp equals the request's generation. */
  readonly #overlap: Int32Array;
  readonly #stamp: Int32Array;
  #generation = 0;
  readonly #pool: ScoreCandidate[] = [];

  constructor(private readonly index: KvIndex, private readonly rand: RandomSource, private readonly fine: NowFn) {
    this.#overlap = new Int32Array(index.options.maxSlots);
    this.#stamp = new Int32Array(index.options.maxSlots);
  }

  select(req: RouteRequest, p: SelectParams): Selection {
    const ranks = p.pinned ? [p.pinned] : p.candidates;
    if (ranks.length === 0) throw new KvgateError("KVGATE_ERR_STATE", "select() called without candidates");
    const blockSize = ranks[0]!.worker.blockSize;
    for (const r of ranks) {
      if (r.worker.blockSize !== blockSize) {
        throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "candidates use different block sizes; name the model in the request");
      }
    }
    const t0 = this.fine();
    const matched = this.index.route(req.tokens, { blockSize, lora: req.lora, namespace: req.namespace, eagle: req.eagle });
    const promptBlocks = this.index.lastBlocks;
    const t1 = this.fine();
    const gen = this.#nextGeneration();
    let best = 0;
    for (let i = 0; i < matched; i++) {
      const slot = this.index.matchSlot(i), depth = this.index.matchDepth(i);
      this.#overlap[slot] = depth;
      this.#stamp[slot] = gen;
    }
    for (const r of p.candidates) best = Math.max(best, this.#overlapOf(r, gen));
    const keys = p.assumeKvReuse && (p.willBook || ranks.some((r) => r.load.activeRequests > 0))
      ? readKeys(this.index, promptBlocks) : undefined;

    const isl = req.tokens.length;
    const cands = this.#fill(ranks, gen, keys, promptBlocks);
    const opts = { isl, overlapWeight: p.overlapWeight, temperature: p.temperature };
    let res = scoreCandidates(this.index, cands, { ...opts, rand: this.rand() });
    let chosen = res.chosen;
    if (p.temperature === 0 && ranks.length > 1) chosen = this.#breakTies(ranks, cands, res.costs, chosen, opts);
    const rank = ranks[chosen]!;
    const overlapBlocks = cands[chosen]!.overlapBlocks;
    return {
      rank, isl, blockSize, promptBlocks, overlapBlocks, bestOverlapBlocks: Math.max(best, overlapBlocks),
      cachedTokens: Math.min(isl, overlapBlocks * blockSize), cost: res.costs[chosen]!,
      potentialPrefillTokens: res.potentialPrefillTokens[chosen]!, potentialDecodeBlocks: res.potentialDecodeBlocks[chosen]!,
      keys, hashMatchMs: t1 - t0, matchedAt: t1,
    };
  }

  #nextGeneration(): number {
    this.#generation = (this.#generation + 1) | 0;
    if (this.#generation === 0) {
      // Wrapped after 2^32 requests: clear so no stale stamp can alias the new generation.
      this.#stamp.fill(0);
      this.#generation = 1;
    }
    return this.#generation;
  }

  #overlapOf(r: RankState, gen: number): number {
    return this.#stamp[r.slot] === gen ? this.#overlap[r.slot]! : 0;
  }

  /** Score inputs per rank; tree sizes start at 0 and are only fetched when a cost tie needs them (see #breakTies). */
  #fill(ranks: readonly RankState[], gen: number, keys: Uint32Array | undefined, blocks: number): ScoreCandidate[] {
    const pool = this.#pool;
    while (pool.length < ranks.length) {
      pool.push({ overlapBlocks: 0, activePrefillTokens: 0, activeDecodeBlocks: 0, activeOverlapBlocks: 0, blockSize: 1, treeSize: 0 });
    }
    const out = ranks.length === pool.length ? pool : pool.slice(0, ranks.length);
    for (let i = 0; i < ranks.length; i++) {
      const r = ranks[i]!, c = out[i]!, load = r.load;
      c.overlapBlocks = this.#overlapOf(r, gen);
      c.activePrefillTokens = load.activePrefillTokens;
      c.activeDecodeBlocks = load.activeBlocks;
      c.activeOverlapBlocks = load.activeOverlap(keys, blocks);
      c.blockSize = r.worker.blockSize;
      c.treeSize = 0;
    }
    return out;
  }

  /**
   * Reading a tree size goes through the slot map's string keys (~70 ns each), so the first pass scores with zeros and
   * only the tied cheapest ranks get their real sizes and a second kernel pass (smallest tree wins, then the draw).
   */
  #breakTies(ranks: readonly RankState[], cands: ScoreCandidate[], costs: number[], chosen: number,
    opts: { isl: number; overlapWeight: number; temperature: number }): number {
    const min = costs[chosen]!;
    const tied: number[] = [];
    for (let i = 0; i < costs.length; i++) if (costs[i] === min) tied.push(i);
    if (tied.length < 2) return chosen;
    const subset = tied.map((i) => ({ ...cands[i]!, treeSize: this.index.treeSize(ranks[i]!.worker.id, ranks[i]!.dpRank) }));
    return tied[scoreCandidates(this.index, subset, { ...opts, rand: this.rand() }).chosen]!;
  }
}

/** The last hashed prompt's sequence hashes as (lo, hi) u32 pairs: BigInt-free after the copy out of WASM. */
function readKeys(index: KvIndex, blocks: number): Uint32Array {
  const seq = index.lastSequenceHashes();
  const out = new BigUint64Array(blocks);
  for (let i = 0; i < blocks; i++) out[i] = seq[i]!;
  return new Uint32Array(out.buffer);
}
