/**
 * @module The score kernel's inputs kept filled between requests for the candidate list most requests share (a
 * model's eligible ranks): a request rewrites only what changed since the last — rows whose load changed (the load
 * table's dirty list), positions another list borrowed, and the candidates its prompt matches or shares in-flight
 * blocks with — so the JavaScript part of selection is O(changes + matches) instead of O(fleet).
 */
import { KvgateError } from "../core/errors.ts";
import { ScoreCol, type ScoreColumns } from "../core/kv-index.ts";
import { LOAD_ROW, LoadCol, type LoadTable } from "./load-table.ts";
import type { RankState } from "./worker-registry.ts";

/** Per slot, how many leading blocks of a prompt its in-flight prompts already hold (see InflightPrefixes). */
export interface InflightOverlap {
  query(keys: Uint32Array, n: number): void;
  sharedOf(slot: number): number;
  /** The slots the last query credited (sharedOf > 0), in the first `creditedCount` entries. */
  readonly credited: Int32Array;
  readonly creditedCount: number;
}

/** One request's sparse inputs: the index overlap per slot (valid where stamp equals gen) and the in-flight overlap. */
export interface RequestOverlap {
  /** The slots the prompt matched, in the first `matched` entries. */
  matchedSlots: Int32Array;
  matched: number;
  overlap: Int32Array;
  stamp: Int32Array;
  gen: number;
  inflight: InflightOverlap | undefined;
  inflightCached: boolean;
}

/** The blocks of this request's prompt the index says `r` caches; a cold worker's entries are a partial view (events were lost), so none. */
export function indexOverlap(r: RankState, req: RequestOverlap): number {
  return req.stamp[r.slot] === req.gen && !r.worker.cacheCold ? req.overlap[r.slot]! : 0;
}

export function mismatchedBlocks(): KvgateError {
  return new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "candidates hash blocks differently (block size or EAGLE); name the model in the request");
}

export class KeptColumns {
  /** The list whose inputs the columns hold; undefined until filled or after a failed fill. */
  #list: readonly RankState[] | undefined;
  #n = 0;
  #epoch = -1;
  #scale = Number.NaN;
  #blockSize = 0;
  /** Slot → position in the kept list, -1 elsewhere. */
  readonly #posOf: Int32Array;
  /** Positions [0, borrowed) hold another list's inputs (a pinned rank, a hot prefix's subset). */
  #borrowed = 0;
  /** Positions whose overlap and active-overlap columns the last request set (a position may appear twice). */
  readonly #touched: Int32Array;
  #touchedN = 0;
  #treeWritten = false;
  /** Scratch for heldPositions' dedupe (all zero between calls). */
  readonly #seen: Uint8Array;

  constructor(private readonly loads: LoadTable, maxSlots: number) {
    this.#seen = new Uint8Array(maxSlots);
    this.#posOf = new Int32Array(maxSlots).fill(-1);
    this.#touched = new Int32Array(2 * maxSlots);
  }

  /**
   * Makes columns [0, n) hold `ranks`' inputs for this request. `kept`: nobody else wrote the columns since this
   * object's last call (KvIndex.scoreColumnsKept). Returns the largest index overlap among the candidates.
   */
  fill(cols: ScoreColumns, kept: boolean, ranks: readonly RankState[], n: number, blockSize: number, queuedScale: number,
    keys: Float64Array, req: RequestOverlap): number {
    if (kept && ranks === this.#list && n === this.#n && this.loads.epoch === this.#epoch && queuedScale === this.#scale &&
      blockSize === this.#blockSize) this.#refresh(cols, keys);
    else this.#baseline(cols, ranks, n, blockSize, queuedScale, keys);
    return this.#apply(cols, req);
  }

  /** Whether the columns now hold `ranks` (its last fill was fill, not fillOther). */
  holds(ranks: readonly RankState[]): boolean {
    return ranks === this.#list && this.#borrowed === 0;
  }

  /**
   * The positions whose overlap column this request set above zero (the candidates holding the prompt's prefix, as
   * the kernel saw them), each once, into `out`; returns the count. Only while holds() is true.
   */
  heldPositions(cols: ScoreColumns, out: Int32Array): number {
    const { f64, base, stride } = cols;
    const overlapCol = base + ScoreCol.overlap * stride, seen = this.#seen;
    let c = 0;
    for (let t = 0; t < this.#touchedN; t++) {
      const pos = this.#touched[t]!;
      if (seen[pos] === 1 || !(f64[overlapCol + pos]! > 0)) continue;
      seen[pos] = 1;
      out[c++] = pos;
    }
    for (let j = 0; j < c; j++) seen[out[j]!] = 0;
    return c;
  }

  /** Fills columns [0, n) for a list they do not keep (a pinned rank, a hot prefix's subset); refilled next request. */
  fillOther(cols: ScoreColumns, ranks: readonly RankState[], n: number, blockSize: number, queuedScale: number,
    keys: Float64Array, req: RequestOverlap): number {
    if (n > this.#borrowed) this.#borrowed = n;
    return this.#fillFromScratch(cols, ranks, n, blockSize, queuedScale, keys, req);
  }

  /** For tests: the kept inputs of [0, n) against a fill from scratch (which rewrites them, equal when correct). */
  verify(cols: ScoreColumns, ranks: readonly RankState[], n: number, blockSize: number, queuedScale: number,
    keys: Float64Array, req: RequestOverlap, best: number): void {
    const { f64, base, stride } = cols;
    const inputs = [ScoreCol.overlap, ScoreCol.prefill, ScoreCol.decode, ScoreCol.activeOverlap, ScoreCol.blockSize, ScoreCol.tree];
    const kept = inputs.map((c) => f64.slice(base + c * stride, base + c * stride + n));
    const keptKeys = keys.slice(0, n);
    const fresh = this.#fillFromScratch(cols, ranks, n, blockSize, queuedScale, keys, req);
    const differs = (what: string, i: number, was: number, is: number): never => {
      throw new KvgateError("KVGATE_ERR_STATE", `kept ${what} at ${i} (${ranks[i]!.worker.id}/${ranks[i]!.dpRank}) is ${was}, a full fill gives ${is}`);
    };
    inputs.forEach((c, k) => {
      for (let i = 0; i < n; i++) if (!Object.is(f64[base + c * stride + i], kept[k]![i])) differs(`column ${c}`, i, kept[k]![i]!, f64[base + c * stride + i]!);
    });
    for (let i = 0; i < n; i++) if (keys[i] !== keptKeys[i]) differs("rank key", i, keptKeys[i]!, keys[i]!);
    if (fresh !== best) throw new KvgateError("KVGATE_ERR_STATE", `kept best overlap ${best}, a full fill gives ${fresh}`);
  }

  /** The tie rule wrote tree sizes; the column is cleared on the next request. */
  treeWritten(): void {
    this.#treeWritten = true;
  }

  #baseline(cols: ScoreColumns, ranks: readonly RankState[], n: number, blockSize: number, queuedScale: number, keys: Float64Array): void {
    const posOf = this.#posOf;
    if (this.#list !== undefined) for (let i = 0; i < this.#n; i++) posOf[this.#list[i]!.slot] = -1;
    this.#list = undefined;
    this.loads.clearDirty();
    const rows = this.loads.rows;
    const eagle = rows[ranks[0]!.slot * LOAD_ROW + LoadCol.eagle];
    for (let i = 0; i < n; i++) {
      const slot = ranks[i]!.slot, o = slot * LOAD_ROW;
      if (rows[o + LoadCol.blockSize] !== blockSize || rows[o + LoadCol.eagle] !== eagle) {
        for (let j = 0; j < i; j++) posOf[ranks[j]!.slot] = -1;
        throw mismatchedBlocks();
      }
      posOf[slot] = i;
    }
    this.#list = ranks;
    this.#n = n;
    this.#epoch = this.loads.epoch;
    this.#scale = queuedScale;
    this.#blockSize = blockSize;
    this.#borrowed = 0;
    this.#touchedN = 0;
    this.#treeWritten = false;
    this.#rewrite(cols, 0, n, keys);
  }

  /** Baseline inputs of kept positions [from, to): the rows' loads, no overlap. */
  #rewrite(cols: ScoreColumns, from: number, to: number, keys: Float64Array): void {
    const { f64, base, stride } = cols;
    const list = this.#list!, rows = this.loads.rows, scale = this.#scale, bs = this.#blockSize;
    for (let i = from; i < to; i++) {
      const o = list[i]!.slot * LOAD_ROW;
      keys[i] = rows[o + LoadCol.key]!;
      f64[base + ScoreCol.overlap * stride + i] = 0;
      f64[base + ScoreCol.prefill * stride + i] = rows[o + LoadCol.prefill]! * scale;
      f64[base + ScoreCol.decode * stride + i] = rows[o + LoadCol.decode]!;
      f64[base + ScoreCol.activeOverlap * stride + i] = 0;
      f64[base + ScoreCol.blockSize * stride + i] = bs;
      f64[base + ScoreCol.tree * stride + i] = 0;
    }
  }

  /** Undoes what the last request and borrowers wrote, and takes in the loads that changed since. */
  #refresh(cols: ScoreColumns, keys: Float64Array): void {
    const { f64, base, stride } = cols;
    if (this.#borrowed > 0) {
      this.#rewrite(cols, 0, Math.min(this.#borrowed, this.#n), keys);
      this.#borrowed = 0;
    }
    const overlapCol = base + ScoreCol.overlap * stride, activeCol = base + ScoreCol.activeOverlap * stride;
    for (let t = 0; t < this.#touchedN; t++) {
      const pos = this.#touched[t]!;
      f64[overlapCol + pos] = 0;
      f64[activeCol + pos] = 0;
    }
    this.#touchedN = 0;
    if (this.#treeWritten) {
      const treeCol = base + ScoreCol.tree * stride;
      f64.fill(0, treeCol, treeCol + this.#n);
      this.#treeWritten = false;
    }
    const loads = this.loads, rows = loads.rows, dirty = loads.dirty, posOf = this.#posOf, scale = this.#scale;
    const prefillCol = base + ScoreCol.prefill * stride, decodeCol = base + ScoreCol.decode * stride;
    for (let d = 0; d < loads.dirtyCount; d++) {
      const slot = dirty[d]!, pos = posOf[slot]!;
      if (pos < 0) continue;
      f64[prefillCol + pos] = rows[slot * LOAD_ROW + LoadCol.prefill]! * scale;
      f64[decodeCol + pos] = rows[slot * LOAD_ROW + LoadCol.decode]!;
    }
    loads.clearDirty();
  }

  /** Every input of [0, n) from the load table and the request's overlaps; returns the best index overlap. */
  #fillFromScratch(cols: ScoreColumns, ranks: readonly RankState[], n: number, blockSize: number, queuedScale: number,
    keys: Float64Array, req: RequestOverlap): number {
    const { f64, base, stride } = cols;
    const overlapCol = base + ScoreCol.overlap * stride, prefillCol = base + ScoreCol.prefill * stride;
    const decodeCol = base + ScoreCol.decode * stride, activeCol = base + ScoreCol.activeOverlap * stride;
    const bsCol = base + ScoreCol.blockSize * stride, treeCol = base + ScoreCol.tree * stride;
    const rows = this.loads.rows, { inflight, inflightCached } = req;
    const eagle = rows[ranks[0]!.slot * LOAD_ROW + LoadCol.eagle];
    let best = 0;
    for (let i = 0; i < n; i++) {
      const slot = ranks[i]!.slot, o = slot * LOAD_ROW;
      if (rows[o + LoadCol.blockSize] !== blockSize || rows[o + LoadCol.eagle] !== eagle) throw mismatchedBlocks();
      keys[i] = rows[o + LoadCol.key]!;
      const cachedNow = indexOverlap(ranks[i]!, req);
      if (cachedNow > best) best = cachedNow;
      const shared = inflight !== undefined ? inflight.sharedOf(slot) : 0;
      f64[overlapCol + i] = inflightCached && rows[o + LoadCol.kvEvents] === 1 && shared > cachedNow ? shared : cachedNow;
      f64[prefillCol + i] = rows[o + LoadCol.prefill]! * queuedScale;
      f64[decodeCol + i] = rows[o + LoadCol.decode]!;
      f64[activeCol + i] = rows[o + LoadCol.active] === 1 ? shared : 0;
      f64[bsCol + i] = blockSize;
      f64[treeCol + i] = 0;
    }
    return best;
  }

  /** This request's overlaps: index matches (a cold worker's count as none) and in-flight blocks. */
  #apply(cols: ScoreColumns, req: RequestOverlap): number {
    const { f64, base, stride } = cols;
    const overlapCol = base + ScoreCol.overlap * stride, activeCol = base + ScoreCol.activeOverlap * stride;
    const posOf = this.#posOf, list = this.#list!, touched = this.#touched, rows = this.loads.rows;
    let best = 0, t = this.#touchedN;
    for (let j = 0; j < req.matched; j++) {
      const pos = posOf[req.matchedSlots[j]!]!;
      if (pos < 0) continue;
      const cached = indexOverlap(list[pos]!, req);
      if (cached > best) best = cached;
      f64[overlapCol + pos] = cached;
      touched[t++] = pos;
    }
    const inflight = req.inflight;
    if (inflight !== undefined) {
      const credited = inflight.credited;
      for (let c = 0; c < inflight.creditedCount; c++) {
        const slot = credited[c]!, pos = posOf[slot]!;
        if (pos < 0) continue;
        const shared = inflight.sharedOf(slot), o = slot * LOAD_ROW;
        // A KV-event rank's index learns a prompt's blocks only once its engine stored them; blocks an in-flight
        // prompt there is prefilling will be cached by the time this one runs (approximate ranks recorded them at routing).
        if (req.inflightCached && rows[o + LoadCol.kvEvents] === 1 && shared > f64[overlapCol + pos]!) f64[overlapCol + pos] = shared;
        f64[activeCol + pos] = rows[o + LoadCol.active] === 1 ? shared : 0;
        touched[t++] = pos;
      }
    }
    this.#touchedN = t;
    return best;
  }
}
