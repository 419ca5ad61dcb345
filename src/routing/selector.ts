/**
 * @module Picks a (worker, rank) for one prompt: hash and match in WASM, join the overlaps with live load, score with
 * the core's cost function. Books nothing; the hot path, so it avoids per-request allocation where it can.
 */
import { TRUST_BANDS, trustBand } from "./load-trust.ts";
import { KvgateError } from "../core/errors.ts";
import { CacheSalts } from "../core/cache-salt.ts";
import { ScoreCol, type KvIndex } from "../core/kv-index.ts";
import type { NowFn } from "./clock.ts";
import type { RandomSource } from "./prng.ts";
import { PolicyPicker, type RoutingPolicy } from "./routing-policy.ts";
import type { RouteRequest } from "./routing-types.ts";
import { captureSelection, type CaptureLevel, type SelectionCapture } from "./selection-capture.ts";
import { breakTies, type TieInputs } from "./tie-break.ts";
import { pickSpreadSet, prefixKeyOf, type HotPrefixes } from "./hot-prefixes.ts";
import type { RankState } from "./worker-registry.ts";
import { LOAD_ROW, LoadCol, type LoadTable } from "./load-table.ts";
import { KeptColumns, indexOverlap, type InflightOverlap, type RequestOverlap } from "./kept-columns.ts";
import { SpreadRankings } from "./spread-rankings.ts";

export type { InflightOverlap } from "./kept-columns.ts";

export { rendezvousWeight } from "./tie-break.ts";

export { Capture, type CaptureLevel, type SelectionCapture } from "./selection-capture.ts";

export interface SelectParams {
  /** Non-empty; when `pinned` is set it is the only rank considered. */
  candidates: readonly RankState[];
  /** Chosen without scoring (explicit target, hard session, plan, or an eligible soft preference). */
  pinned?: RankState;
  overlapWeight: number;
  /** RouterConfig.newPrefillFactor (1 is the reference's cost). */
  newPrefillFactor?: number;
  /** RouterConfig.inflightCached: a KV-event rank's overlap includes blocks in-flight prompts there are prefilling. */
  inflightCached?: boolean;
  temperature: number;
  /** Whether block keys are needed afterwards (booking with KV reuse assumed). */
  willBook: boolean;
  assumeKvReuse: boolean;
  /** Default none: nothing is copied (no allocation on the hot path). */
  capture?: CaptureLevel;
}

export interface Selection {
  rank: RankState;
  isl: number;
  blockSize: number;
  promptBlocks: number;
  overlapBlocks: number;
  bestOverlapBlocks: number;
  cachedTokens: number;
  /** cachedTokens discounted by the rank's learnt trust: what the engine is expected to report. */
  expectedCachedTokens: number;
  cost: number;
  potentialPrefillTokens: number;
  /** Prefill tokens queued on the chosen rank before this request (its trust band, see load-trust.ts). */
  queuedPrefillTokens: number;
  potentialDecodeBlocks: number;
  /**
   * Sequence hashes as (lo, hi) u32 pairs for the first `promptBlocks` blocks (the array may be longer), when read;
   * the selector's scratch, valid until its next select (booking copies).
   */
  keys: Uint32Array | undefined;
  hashMatchMs: number;
  /** Fine-timer reading when matching ended; scheduling time is measured from here to the end of booking. */
  matchedAt: number;
  /** The prompt's prefix identity (its first block, see prefixKeyOf) for hot-prefix spreading; -1 when spreading is
   * off or the prompt has no full block. */
  prefixKey: number;
  /** Set when the params asked for a capture. */
  capture?: SelectionCapture;
}

const EMPTY: readonly RankState[] = [];

/** Prefill tokens booked on a rank and not yet prefilled, by this replica and the others it hears from. */
function queuedPrefill(load: RankState["load"]): number {
  return load.activePrefillTokens + load.remote.prefillTokens;
}

/** A hot prefix leaves its workers when the cheapest of them costs more than this × the cheapest candidate. */
export const SPREAD_VALVE = 1.5;

export class Selector implements TieInputs {
  /** Overlap per index slot for the current request; valid only where stamp equals the request's generation. */
  readonly #overlap: Int32Array;
  readonly #stamp: Int32Array;
  #generation = 0;
  /** Reused for every request's keys: a fresh array per request would cost a GC-tracked backing store each time. */
  #keys = new Uint32Array(0);
  /** Set for a cache-blind policy: it overrides the kernel's choice (costs are still computed for the signals). */
  readonly #picker: PolicyPicker | undefined;
  readonly #salts: CacheSalts;
  // The current selection, for the TieInputs methods (set at the start of every select).
  #ranks: readonly RankState[] = [];
  #curKeys: Uint32Array | undefined;
  #promptBlocks = 0;
  #tie: "rendezvous" | "tree" | undefined;
  #tieDraw = 0;
  // Scratch for a hot prefix's candidate subset (reused: no allocation per request).
  readonly #spreadIdx: Int32Array;
  readonly #spreadWeights: Float64Array;
  /** The rendezvous keys of the candidates the last fill pass read, by position. */
  readonly #rankKeys: Float64Array;
  readonly #spreadRanks: RankState[] = [];
  /** Hot prefixes' rendezvous orders over the kept list, and the positions holding this request's prefix. */
  readonly #rankings: SpreadRankings;
  readonly #heldScratch: Int32Array;
  /** The usual candidate list's inputs, kept in the score columns between requests. */
  readonly #kept: KeptColumns;
  /** This request's sparse overlaps, for #kept (the slots its prompt matched, in the first `matched`). */
  readonly #req: RequestOverlap;

  /** For tests: every kept fill is compared with a fill from scratch (a mismatch throws KVGATE_ERR_STATE). */
  static verifyKeptColumns = false;

  /** Hot-prefix spreading; unset = every candidate is scored (the reference behaviour). */
  spread: HotPrefixes | undefined;

  /**
   * @param loads every candidate's load, by slot (the registry's; RankLoad keeps it current).
   * @param inflight the overlap of a prompt with each rank's in-flight prompts (blocks the cost function counts as
   *   already active there); without it no in-flight overlap is credited.
   */
  constructor(private readonly index: KvIndex, private readonly loads: LoadTable, private readonly rand: RandomSource,
    private readonly fine: NowFn, readonly policy: RoutingPolicy = "kv", private readonly inflight?: InflightOverlap) {
    this.#overlap = new Int32Array(index.options.maxSlots);
    this.#stamp = new Int32Array(index.options.maxSlots);
    this.trust = new Float64Array(index.options.maxSlots * TRUST_BANDS).fill(1);
    this.#spreadIdx = new Int32Array(index.options.maxSlots);
    this.#spreadWeights = new Float64Array(index.options.maxSlots);
    this.#rankKeys = new Float64Array(index.options.maxSlots);
    this.#kept = new KeptColumns(loads, index.options.maxSlots);
    this.#rankings = new SpreadRankings(index.options.maxSlots);
    this.#heldScratch = new Int32Array(index.options.maxSlots);
    this.#req = {
      matchedSlots: new Int32Array(index.options.maxSlots), matched: 0, overlap: this.#overlap, stamp: this.#stamp, gen: 0,
      inflight: undefined, inflightCached: false,
    };
    this.#picker = policy === "kv" ? undefined : new PolicyPicker(policy, rand);
    this.#salts = new CacheSalts((b, seed) => index.xxh3(b, seed));
  }

  /**
   * Per index slot and trust band (`slot * TRUST_BANDS + trustBand(queued prefill)`), the share of its index-predicted
   * cached blocks the engine really reports (the closed loop's learnt ratio, 1 until known): the expected cached tokens
   * of a decision are its overlap times this. The cost still credits the whole overlap: discounting it there spread
   * load further and lowered hit rates in a saturated replay.
   */
  readonly trust: Float64Array;

  select(req: RouteRequest, p: SelectParams): Selection {
    let ranks = p.pinned ? [p.pinned] : p.candidates;
    let n = ranks.length;
    if (n === 0) throw new KvgateError("KVGATE_ERR_STATE", "select() called without candidates");
    if (n > this.index.options.maxSlots) throw new KvgateError("KVGATE_ERR_STATE", "more candidates than index slots");
    const blockSize = ranks[0]!.worker.blockSize, eagle = req.eagle ?? ranks[0]!.worker.eagle;
    // Whether in-flight prompts can matter. A booking selection always asks the in-flight index (empty when nothing is
    // in flight, so the answer is the same); a query-only one reads the prompt's keys only when something is active.
    let anyActive = p.willBook;
    const rows = this.loads.rows;
    for (let i = 0; i < n && !anyActive; i++) if (rows[ranks[i]!.slot * LOAD_ROW + LoadCol.active] === 1) anyActive = true;
    const t0 = this.fine();
    const matched = this.index.route(req.tokens, this.#salts.options(blockSize, req.lora, req.namespace, eagle));
    const promptBlocks = this.index.lastBlocks;
    const t1 = this.fine();
    const gen = this.#nextGeneration();
    const matches = this.index.matches;
    const matchedSlots = this.#req.matchedSlots;
    for (let i = 0; i < matched; i++) {
      const slot = matches.slot(i);
      this.#overlap[slot] = matches.depth(i);
      this.#stamp[slot] = gen;
      matchedSlots[i] = slot;
    }
    const keys = p.assumeKvReuse && (p.willBook || anyActive) ? this.#readKeys(promptBlocks) : undefined;
    const isl = req.tokens.length;
    const inflight = keys !== undefined && anyActive ? this.inflight : undefined;
    inflight?.query(keys!, promptBlocks);

    const kept = this.index.scoreColumnsKept(this);
    const cols = this.index.scoreColumns(this);
    const { f64, base, stride, run } = cols;
    const costCol = base + ScoreCol.cost * stride;
    // The kernel's cost is weight × (queued + new prefill) / block + decode; a new-prefill factor α is given to it as
    // weight × α over queued ÷ α, so the kernel, the tie-break and a logged decision's replay all see one cost.
    const alpha = p.newPrefillFactor ?? 1;
    const weight = p.overlapWeight * alpha;
    // The queued-prefill column's scale.
    const queuedScale = 1 / alpha;
    // The best overlap any candidate has in the index (the fill pass reads it; a pinned rank leaves the others).
    const over = this.#req;
    over.matched = matched;
    over.gen = gen;
    over.inflight = inflight;
    over.inflightCached = p.inflightCached === true;
    let best: number;
    if (p.pinned) {
      best = this.#kept.fillOther(cols, ranks, n, blockSize, queuedScale, this.#rankKeys, over);
      for (const r of p.candidates) best = Math.max(best, indexOverlap(r, over));
    } else {
      best = this.#kept.fill(cols, kept, ranks, n, blockSize, queuedScale, this.#rankKeys, over);
      if (Selector.verifyKeptColumns) this.#kept.verify(cols, ranks, n, blockSize, queuedScale, this.#rankKeys, over, best);
    }
    const kernelDraw = this.rand();
    let chosen = run(n, isl, weight, p.temperature, kernelDraw);
    if (chosen < 0 || chosen >= n) throw new KvgateError("KVGATE_ERR_STATE", `score kernel returned ${chosen}`);
    let prefixKey = -1;
    if (this.spread !== undefined && promptBlocks > 0) {
      const words = keys ?? this.#readKeys(promptBlocks);
      prefixKey = prefixKeyOf(words[0]!, words[1]!);
      const k = !p.pinned && n > 2 && this.#picker === undefined ? this.spread.workersFor(prefixKey, n) : n;
      if (k < n) {
        const idx = this.#spreadIdx;
        // Holders as the kernel saw them (with in-flight blocks when those count as cached).
        const overlapCol = base + ScoreCol.overlap * stride;
        const held = this.#heldScratch;
        const fast = this.#kept.holds(ranks) &&
          this.#rankings.pick(ranks, n, k, words[0]!, words[1]!, prefixKey, held, this.#kept.heldPositions(cols, held), this.#rankKeys, idx);
        if (!fast) pickSpreadSet(n, k, words[0]!, words[1]!, f64, overlapCol, this.#rankKeys, idx, this.#spreadWeights);
        else if (Selector.verifyKeptColumns) {
          const ref = new Int32Array(k);
          pickSpreadSet(n, k, words[0]!, words[1]!, f64, overlapCol, this.#rankKeys, ref, new Float64Array(n));
          if (ref.some((v, j) => v !== idx[j])) throw new KvgateError("KVGATE_ERR_STATE", `spread set ${idx.slice(0, k).join()} differs from pickSpreadSet's ${ref.join()}`);
        }
        let globalMin = Infinity, setMin = Infinity;
        for (let i = 0; i < n; i++) globalMin = Math.min(globalMin, f64[costCol + i]!);
        for (let j = 0; j < k; j++) setMin = Math.min(setMin, f64[costCol + idx[j]!]!);
        // The prefix's workers keep it unless they cost far more than the best elsewhere (a worker the set cannot
        // leave would otherwise take any load): then the plain choice stands and the set follows the caches.
        if (setMin <= SPREAD_VALVE * globalMin + 1) {
          const sub = this.#spreadRanks;
          sub.length = k;
          for (let j = 0; j < k; j++) sub[j] = ranks[idx[j]!]!;
          ranks = sub;
          n = k;
          this.#kept.fillOther(cols, ranks, n, blockSize, queuedScale, this.#rankKeys, over);
          chosen = run(n, isl, weight, p.temperature, kernelDraw);
          if (chosen < 0 || chosen >= n) throw new KvgateError("KVGATE_ERR_STATE", `score kernel returned ${chosen}`);
          if (p.willBook) this.spread.spreadDecisions++;
        }
      }
    }
    this.#ranks = ranks;
    this.#curKeys = keys;
    this.#promptBlocks = promptBlocks;
    this.#tie = undefined;
    if (this.#picker && !p.pinned) chosen = this.#picker.pick(ranks, p.willBook);
    else if (p.temperature === 0 && n > 1) chosen = breakTies(cols, n, chosen, isl, weight, promptBlocks, this);
    const capture = p.capture ? captureSelection(req, {
      cols, ranks, n, chosen, pinned: p.pinned !== undefined, level: p.capture, policy: this.policy, overlapWeight: weight, temperature: p.temperature,
      blockSize, eagle, kernelDraw, tie: this.#tie, tieDraw: this.#tieDraw, sequenceWords: () => this.firstBlockWords(), promptBlocks,
    }) : undefined;
    this.#ranks = EMPTY;
    // As the kernel saw it (the columns hold the final candidates, a pinned rank included).
    const overlapBlocks = f64[base + ScoreCol.overlap * stride + chosen]!;
    const queued = queuedPrefill(ranks[chosen]!.load);
    const trust = this.trust[ranks[chosen]!.slot * TRUST_BANDS + trustBand(queued)]!;
    return {
      rank: ranks[chosen]!, isl, blockSize, promptBlocks, overlapBlocks, bestOverlapBlocks: Math.max(best, overlapBlocks),
      cachedTokens: Math.min(isl, overlapBlocks * blockSize),
      expectedCachedTokens: Math.min(isl, Math.round(overlapBlocks * trust * blockSize)), cost: f64[costCol + chosen]!,
      // In tokens as they are: the kernel's column holds queued prefill scaled by the new-prefill factor.
      potentialPrefillTokens: queued + Math.max(0, isl - overlapBlocks * blockSize), queuedPrefillTokens: queued,
      potentialDecodeBlocks: f64[base + ScoreCol.potentialDecode * stride + chosen]!,
      keys, hashMatchMs: t1 - t0, matchedAt: t1, prefixKey, capture,
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

  // ---- TieInputs, over the current selection ----------------------------------------------------------------

  treeSize(i: number): number {
    return this.index.treeSizeOfSlot(this.#ranks[i]!.slot);
  }

  rankKey(i: number): number {
    return this.#ranks[i]!.key;
  }

  firstBlockWords(): Uint32Array {
    return (this.#curKeys ??= this.#readKeys(this.#promptBlocks));
  }

  draw(): number {
    return (this.#tieDraw = this.rand());
  }

  tied(kind: "rendezvous" | "tree"): void {
    this.#tie = kind;
    if (kind === "tree") this.#kept.treeWritten();
  }
}
