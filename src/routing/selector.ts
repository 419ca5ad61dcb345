/**
 * @module Picks a (worker, rank) for one prompt: hash and match in WASM, join the overlaps with live load, score with
 * the core's cost function. Books nothing; the hot path, so it avoids per-request allocation where it can.
 */
import { KvgateError } from "../core/errors.ts";
import { CacheSalts } from "../core/cache-salt.ts";
import { ScoreCol, type KvIndex } from "../core/kv-index.ts";
import type { NowFn } from "./clock.ts";
import type { RandomSource } from "./prng.ts";
import { PolicyPicker, type RoutingPolicy } from "./routing-policy.ts";
import type { RouteRequest } from "./routing-types.ts";
import type { RankState } from "./worker-registry.ts";

/** Per rank slot, how many leading blocks of a prompt its in-flight prompts already hold (see InflightPrefixes). */
export interface InflightOverlap {
  query(keys: Uint32Array, n: number): void;
  sharedOf(slot: number): number;
}

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
  /**
   * Sequence hashes as (lo, hi) u32 pairs for the first `promptBlocks` blocks (the array may be longer), when read;
   * the selector's scratch, valid until its next select (booking copies).
   */
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
  /** Reused for every request's keys: a fresh array per request would cost a GC-tracked backing store each time. */
  #keys = new Uint32Array(0);
  /** Set for a cache-blind policy: it overrides the kernel's choice (costs are still computed for the signals). */
  readonly #picker: PolicyPicker | undefined;
  readonly #salts: CacheSalts;

  /**
   * @param inflight the overlap of a prompt with each rank's in-flight prompts (blocks the cost function counts as
   *   already active there); without it no in-flight overlap is credited.
   */
  constructor(private readonly index: KvIndex, private readonly rand: RandomSource, private readonly fine: NowFn,
    policy: RoutingPolicy = "kv", private readonly inflight?: InflightOverlap) {
    this.#overlap = new Int32Array(index.options.maxSlots);
    this.#stamp = new Int32Array(index.options.maxSlots);
    this.#picker = policy === "kv" ? undefined : new PolicyPicker(policy, rand);
    this.#salts = new CacheSalts((b, seed) => index.xxh3(b, seed));
  }

  select(req: RouteRequest, p: SelectParams): Selection {
    const ranks = p.pinned ? [p.pinned] : p.candidates;
    const n = ranks.length;
    if (n === 0) throw new KvgateError("KVGATE_ERR_STATE", "select() called without candidates");
    if (n > this.index.options.maxSlots) throw new KvgateError("KVGATE_ERR_STATE", "more candidates than index slots");
    const blockSize = ranks[0]!.worker.blockSize;
    let anyActive = false;
    for (let i = 0; i < n; i++) {
      const r = ranks[i]!;
      if (r.worker.blockSize !== blockSize) {
        throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "candidates use different block sizes; name the model in the request");
      }
      if (r.load.activeRequests > 0) anyActive = true;
    }
    const t0 = this.fine();
    const matched = this.index.route(req.tokens, this.#salts.options(blockSize, req.lora, req.namespace, req.eagle));
    const promptBlocks = this.index.lastBlocks;
    const t1 = this.fine();
    const gen = this.#nextGeneration();
    const matches = this.index.matches;
    for (let i = 0; i < matched; i++) {
      const slot = matches.slot(i);
      this.#overlap[slot] = matches.depth(i);
      this.#stamp[slot] = gen;
    }
    let best = 0;
    for (const r of p.candidates) best = Math.max(best, this.#overlapOf(r, gen));
    const keys = p.assumeKvReuse && (p.willBook || anyActive) ? this.#readKeys(promptBlocks) : undefined;
    const isl = req.tokens.length;
    const inflight = keys !== undefined && anyActive ? this.inflight : undefined;
    inflight?.query(keys!, promptBlocks);

    // The core's cost kernel reads f64 columns of `stride` entries; fill them straight from the rank loads.
    const { f64, base, stride, run } = this.index.scoreColumns();
    const overlapCol = base + ScoreCol.overlap * stride, prefillCol = base + ScoreCol.prefill * stride;
    const decodeCol = base + ScoreCol.decode * stride, activeCol = base + ScoreCol.activeOverlap * stride;
    const bsCol = base + ScoreCol.blockSize * stride, treeCol = base + ScoreCol.tree * stride;
    for (let i = 0; i < n; i++) {
      const r = ranks[i]!, load = r.load;
      f64[overlapCol + i] = this.#overlapOf(r, gen);
      f64[prefillCol + i] = load.activePrefillTokens + load.remote.prefillTokens;
      const own = load.activeBlocks + load.remote.blocks;
      f64[decodeCol + i] = load.engineBlocks > own ? load.engineBlocks : own;
      f64[activeCol + i] = inflight !== undefined && load.activeRequests > 0 ? inflight.sharedOf(r.slot) : 0;
      f64[bsCol + i] = blockSize;
      f64[treeCol + i] = 0;
    }
    let chosen = run(n, isl, p.overlapWeight, p.temperature, this.rand());
    if (chosen < 0 || chosen >= n) throw new KvgateError("KVGATE_ERR_STATE", `score kernel returned ${chosen}`);
    if (this.#picker && !p.pinned) chosen = this.#picker.pick(ranks, p.willBook);
    else if (p.temperature === 0 && n > 1) chosen = this.#breakTies(ranks, f64, base, stride, chosen, isl, p.overlapWeight, run, promptBlocks, keys);
    const costCol = base + ScoreCol.cost * stride;
    const overlapBlocks = f64[overlapCol + chosen]!;
    return {
      rank: ranks[chosen]!, isl, blockSize, promptBlocks, overlapBlocks, bestOverlapBlocks: Math.max(best, overlapBlocks),
      cachedTokens: Math.min(isl, overlapBlocks * blockSize), cost: f64[costCol + chosen]!,
      potentialPrefillTokens: f64[base + ScoreCol.potentialPrefill * stride + chosen]!,
      potentialDecodeBlocks: f64[base + ScoreCol.potentialDecode * stride + chosen]!,
      keys, hashMatchMs: t1 - t0, matchedAt: t1,
    };
  }

  /** The last hashed prompt's sequence hashes as (lo, hi) u32 pairs, BigInt-free, in the scratch buffer. */
  #readKeys(blocks: number): Uint32Array {
    if (this.#keys.length < 2 * blocks) this.#keys = new Uint32Array(Math.max(2 * blocks, 2 * this.#keys.length));
    this.index.lastSequenceWordsInto(this.#keys);
    return this.#keys;
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
    // A cold worker's index entries are a partial view (events were lost): its overlap is not trusted.
    return this.#stamp[r.slot] === gen && !r.worker.cacheCold ? this.#overlap[r.slot]! : 0;
  }

  /**
   * Ranks sharing the lowest cost. A cold prefix (nothing cached on any of them) goes to the tied rank that wins a
   * rendezvous hash of the prompt's first block: replicas that have not heard of each other's decisions yet still
   * send a new prefix to the same worker, and later prompts with that prefix follow it there. A warm tie reads the
   * tied ranks' tree sizes (through the slot map's string keys, ~70 ns each, so only then) and runs the kernel again
   * on the same columns: the others cost more, so their tree entries do not matter, and the kernel's own tie rule
   * applies (smallest tree, then the random draw).
   */
  #breakTies(ranks: readonly RankState[], f64: Float64Array, base: number, stride: number, chosen: number, isl: number,
    weight: number, run: (n: number, isl: number, w: number, t: number, r: number) => number, promptBlocks: number,
    keys: Uint32Array | undefined): number {
    const costCol = base + ScoreCol.cost * stride, treeCol = base + ScoreCol.tree * stride, overlapCol = base + ScoreCol.overlap * stride;
    const min = f64[costCol + chosen]!;
    let ties = 0, cold = true;
    for (let i = 0; i < ranks.length; i++) {
      if (f64[costCol + i] !== min) continue;
      ties++;
      if (f64[overlapCol + i] !== 0) cold = false;
    }
    if (ties < 2) return chosen;
    if (cold && promptBlocks > 0) return this.#rendezvous(ranks, f64, costCol, min, keys ?? this.#readKeys(promptBlocks));
    for (let i = 0; i < ranks.length; i++) if (f64[costCol + i] === min) f64[treeCol + i] = this.index.treeSizeOfSlot(ranks[i]!.slot);
    const again = run(ranks.length, isl, weight, 0, this.rand());
    if (again < 0 || again >= ranks.length) throw new KvgateError("KVGATE_ERR_STATE", `score kernel returned ${again}`);
    return again;
  }

  /** The tied rank with the highest hash of (first block's sequence hash, worker id, dp rank). */
  /** `keys`: the prompt's sequence hashes as (lo, hi) words, read once per selection. */
  #rendezvous(ranks: readonly RankState[], f64: Float64Array, costCol: number, min: number, keys: Uint32Array): number {
    const lo = keys[0]!, hi = keys[1]!;
    let best = -1, bestWeight = -1;
    for (let i = 0; i < ranks.length; i++) {
      if (f64[costCol + i] !== min) continue;
      const w = rendezvousWeight(lo, hi, rankKey(ranks[i]!));
      if (w > bestWeight) {
        bestWeight = w;
        best = i;
      }
    }
    return best;
  }
}

/** A rank's rendezvous identity: FNV-1a of "worker#rank", the same on every replica, cached per rank. */
const rankKeys = new WeakMap<RankState, number>();
function rankKey(r: RankState): number {
  let k = rankKeys.get(r);
  if (k === undefined) {
    const s = `${r.worker.id}#${r.dpRank}`;
    k = 0x811c9dc5;
    for (let i = 0; i < s.length; i++) k = Math.imul(k ^ s.charCodeAt(i), 0x01000193);
    rankKeys.set(r, (k >>>= 0));
  }
  return k;
}

/** murmur3's 32-bit finalizer over the block hash and the rank key: uniform, so each rank wins 1/n of new prefixes. */
export function rendezvousWeight(lo: number, hi: number, key: number): number {
  let h = Math.imul(lo ^ key, 0x85ebca6b) ^ hi;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h ^ key, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
