/** @module KvIndex: owns one WASM core instance, its memory views and slot map, and turns status codes and traps into typed errors. */
import { Counter, ScoreCol, Status, type CoreExports, type CounterName } from "../wasm/abi.ts";

/** One past the highest counter index the core defines. */
const COUNTER_SLOTS = Math.max(...Object.values(Counter)) + 1;
import { instantiateCore } from "../wasm/instantiate.ts";
import { KvgateError, WasmTrapError } from "./errors.ts";
import { SlotMap } from "./slot-map.ts";
import { MatchView } from "./match-view.ts";
import { budgetBytes, resolveOptions, type KvIndexOptions, type ResolvedKvIndexOptions } from "./kv-index-options.ts";
import { HashSeeds, type HashOptions } from "./hash-seeds.ts";

export type { HashOptions } from "./hash-seeds.ts";

export interface ScoreColumns {
  f64: Float64Array;
  base: number;
  stride: number;
  run: CoreExports["score"];
}

export class KvIndex {
  readonly options: ResolvedKvIndexOptions;
  readonly slots: SlotMap;
  /** Increments each time a trap forced the instance to be rebuilt (the rebuilt index starts empty). */
  generation = 0;
  /** Told after a trap rebuilt the instance empty, for an owner that must re-sync or log. */
  onReset?: (error: WasmTrapError) => void;
  /** The (slot, depth) pairs of the last match, read in place; one object for the index's lifetime. */
  readonly matches = new MatchView();

  #module: WebAssembly.Module;
  #core!: CoreExports;
  #seeds!: HashSeeds;
  #buffer: ArrayBuffer | SharedArrayBuffer | undefined;
  #u8!: Uint8Array;
  #u32!: Uint32Array;
  #u64!: BigUint64Array;
  #f64!: Float64Array;
  /** The tree-size region's offset (in u32 units), fixed at init: read once so the hot accessor makes no WASM call. */
  #sizesU32 = 0;
  #scoreView: ScoreColumns | undefined;
  /** Who last asked for the score columns, when it asked to keep them (see scoreColumns). */
  #scoreOwner: object | undefined;
  /** Counter totals (they outgrow u32) and the core's raw value at the last read, by counter index. */
  readonly #counterTotals = new Float64Array(COUNTER_SLOTS);
  readonly #counterLast = new Uint32Array(COUNTER_SLOTS);

  constructor(module: WebAssembly.Module, options: KvIndexOptions = {}) {
    this.options = resolveOptions(options);
    this.#module = module;
    this.slots = new SlotMap(this.options.maxSlots);
    this.#boot();
  }

  #boot(): void {
    const o = this.options;
    const core = instantiateCore(this.#module);
    const pages = Math.ceil(budgetBytes(o) / 65536);
    const salt = o.salt;
    const st = core.init(o.maxSlots, o.capacity, o.promptTokens, o.eventBlocks, o.eventBytes, o.maxMultimodal,
      o.approxMaxBlocks, o.pruneTargetRatio, Number(salt & 0xffffffffn) | 0, Number((salt >> 32n) & 0xffffffffn) | 0, pages);
    if (st !== Status.OK) throw statusError(st, "init");
    const g = core.grow_prompt(o.promptTokens, o.promptTokens);
    if (g !== Status.OK) throw statusError(g, "init");
    const j = core.match_jump(o.matchJump);
    if (j !== Status.OK) throw statusError(j, "match_jump");
    const memo = core.memo_init(o.promptMemoEntries, o.promptMemoBytes);
    if (memo !== Status.OK) throw statusError(memo, "memo_init");
    this.#core = core;
    this.#buffer = undefined;
    // A fresh core counts from zero; the totals carry on from where the last one left off.
    this.#counterLast.fill(0);
    this.#seeds = new HashSeeds((bytes, seed) => this.#hashBytes(bytes, seed));
    for (const [slot] of this.slots.entries()) core.slot_open(slot);
  }

  /** Re-creates views after memory.grow detached the old ones (undici idiom: compare buffers on every entry). */
  #views(): void {
    const buf = this.#core.memory.buffer;
    if (buf === this.#buffer) return;
    this.#buffer = buf;
    this.#u8 = new Uint8Array(buf);
    this.#u32 = new Uint32Array(buf);
    this.#u64 = new BigUint64Array(buf);
    this.#f64 = new Float64Array(buf);
    this.matches.bind(this.#u32, this.#core.out_ptr() >>> 2);
    this.#sizesU32 = this.#core.sizes_ptr() >>> 2;
    this.#scoreView = undefined;
    this.#scoreOwner = undefined;
  }

  /** Runs `fn` against the core; a trap rebuilds the instance and surfaces as WasmTrapError. */
  #guard<T>(what: string, fn: (core: CoreExports) => T): T {
    try {
      this.#views();
      return fn(this.#core);
    } catch (e) {
      throw this.#trapped(what, e);
    }
  }

  /** What a failed core call throws: a trap rebuilds the instance (WasmTrapError); anything else passes unchanged. */
  #trapped(what: string, e: unknown): unknown {
    if (!(e instanceof WebAssembly.RuntimeError) && !(e instanceof Error && e.message.startsWith("abort:"))) return e;
    this.generation++;
    const err = new WasmTrapError(`WASM core trapped in ${what}: ${(e as Error).message}; index rebuilt empty`, this.generation, e);
    this.#boot();
    this.onReset?.(err);
    return err;
  }

  #hashBytes(bytes: Uint8Array, seed: bigint): bigint {
    return this.#guard("hash_bytes", (c) => {
      if (bytes.length > c.events_cap()) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "salt string too long");
      this.#u8.set(bytes, c.events_ptr());
      const st = c.hash_bytes(bytes.length, Number(seed & 0xffffffffn) | 0, Number(seed >> 32n) | 0);
      if (st !== Status.OK) throw statusError(st, "hash_bytes");
      return this.#u64[c.result_ptr() >>> 3]!;
    });
  }

  /** XXH3-64 of raw bytes with a seed (non-hot: salts, tests). */
  xxh3(bytes: Uint8Array, seed = 0n): bigint {
    return this.#hashBytes(bytes, seed);
  }

  /** The local-hash seed for a LoRA adapter and cache namespace (1337 when neither is set). */
  seedFor(opts: Pick<HashOptions, "lora" | "namespace">): bigint {
    return this.#seeds.seed(opts.lora, opts.namespace);
  }

  #loadPrompt(c: CoreExports, tokens: ArrayLike<number>, opts: HashOptions): number {
    const n = tokens.length;
    if (n > c.tokens_cap()) this.#growPrompt(c, n);
    const tp = c.tokens_ptr() >>> 2;
    if (tokens instanceof Uint32Array) this.#u32.set(tokens, tp);
    else for (let i = 0; i < n; i++) this.#u32[tp + i] = tokens[i]!;
    const mm = opts.multimodal;
    if (mm && mm.length > 0) {
      if (mm.length > c.mm_cap()) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `more than ${c.mm_cap()} multimodal hashes`);
      const sorted = [...mm].sort((a, b) => a.block - b.block || (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
      const mp = c.mm_ptr() >>> 2;
      for (let i = 0; i < sorted.length; i++) {
        this.#u32[mp + 4 * i] = sorted[i]!.block;
        this.#u32[mp + 4 * i + 1] = 0;
        this.#u64[(mp >>> 1) + 2 * i + 1] = BigInt.asUintN(64, sorted[i]!.hash);
      }
    }
    return mm?.length ?? 0;
  }

  #growPrompt(c: CoreExports, need: number): void {
    growPrompt(c, need, this.options.maxPromptTokens);
    this.#views();
  }

  #hashCall(c: CoreExports, tokens: ArrayLike<number>, opts: HashOptions, fn: "hash_prompt" | "route"): number {
    const nMm = this.#loadPrompt(c, tokens, opts);
    const parts = this.#seeds.parts(opts.lora, opts.namespace);
    const r = c[fn](tokens.length, opts.blockSize, parts[0], parts[1], (opts.eagle ? 1 : 0) | (opts.memo === false ? 2 : 0), nMm);
    if (r < 0) throw statusError(r, fn);
    return r;
  }

  /** Local and chained sequence hashes of a prompt (copies; for tests, the CLI and logging). */
  hash(tokens: ArrayLike<number>, opts: HashOptions): { local: bigint[]; seq: bigint[] } {
    return this.#guard("hash_prompt", (c) => {
      const n = this.#hashCall(c, tokens, opts, "hash_prompt");
      const lp = c.local_ptr() >>> 3, sp = c.seq_ptr() >>> 3;
      return { local: Array.from(this.#u64.subarray(lp, lp + n)), seq: Array.from(this.#u64.subarray(sp, sp + n)) };
    });
  }

  /**
   * Hot path: hashes the prompt and matches it in one crossing. Returns how many slots matched; read them through
   * `matches` before the next call. `lastBlocks` tells the prompt's block count.
   */
  route(tokens: ArrayLike<number>, opts: HashOptions): number {
    // The guard is written out here and in matchSequenceWords: no closure per request (the match path allocates nothing).
    try {
      this.#views();
      return this.#hashCall(this.#core, tokens, opts, "route");
    } catch (e) {
      throw this.#trapped("route", e);
    }
  }

  /**
   * Hot path for hashes computed elsewhere (a replica's decision, an embedder's own hashing): matches the sequence
   * hashes given as (lo, hi) u32 pairs, the form `lastSequenceWordsInto` returns, with no BigInt and no allocation.
   * Returns how many slots matched; read them through `matches` before the next call.
   */
  matchSequenceWords(words: Uint32Array): number {
    try {
      this.#views();
      const c = this.#core;
      const n = words.length >>> 1;
      if (n > c.blocks_cap()) this.#growPrompt(c, n);
      this.#u32.set(words.length === 2 * n ? words : words.subarray(0, 2 * n), c.seq_ptr() >>> 2);
      const r = c.find_matches(n);
      if (r < 0) throw statusError(r, "find_matches");
      return r;
    } catch (e) {
      throw this.#trapped("find_matches", e);
    }
  }

  /**
   * The last hashed prompt's sequence hashes as (lo, hi) u32 pairs into `out` (room for 2 × `lastBlocks` words):
   * the BigInt-free form the router's in-flight bookkeeping compares. Returns the block count.
   */
  lastSequenceWordsInto(out: Uint32Array): number {
    return this.#guard("seq", (c) => {
      const n = c.last_blocks();
      if (out.length < 2 * n) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `need room for ${2 * n} words, got ${out.length}`);
      const sp = c.seq_ptr() >>> 2;
      out.set(this.#u32.subarray(sp, sp + 2 * n));
      return n;
    });
  }

  /** Blocks the slot holds in the index (tree size), by slot number: no string key built. */
  treeSizeOfSlot(slot: number): number {
    this.#views();
    return this.#u32[this.#sizesU32 + slot]!;
  }

  /** Blocks in the last hashed prompt. */
  get lastBlocks(): number {
    return this.#core.last_blocks();
  }

  /** The slot of (worker, rank), opening it in the core the first time. */
  slotFor(worker: string, dpRank = 0): number {
    const { slot, fresh } = this.slots.acquire(worker, dpRank);
    if (fresh) this.#guard("slot_open", (c) => c.slot_open(slot));
    return slot;
  }

  /** Forgets a worker (all ranks) or one of its ranks, dropping its blocks and freeing the slots. */
  removeWorker(worker: string, dpRank?: number): void {
    const slots = dpRank === undefined ? this.slots.slotsOf(worker) : [this.slots.get(worker, dpRank)].filter((s) => s !== undefined);
    for (const slot of slots) {
      this.#guard("slot_close", (c) => c.slot_close(slot));
      this.slots.release(slot);
    }
  }

  /**
   * Applies a binary event batch (see event-encoder.ts). Records are applied in order, each atomically; a corrupt
   * record stops the batch and is reported with its byte offset, leaving earlier records applied.
   */
  applyBatch(bytes: Uint8Array): { records: number; corruptAt?: number } {
    return this.#guard("apply_events", (c) => {
      if (bytes.length > c.events_cap()) {
        throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `event batch of ${bytes.length} bytes exceeds eventBytes ${c.events_cap()}`);
      }
      this.#u8.set(bytes, c.events_ptr());
      const r = c.apply_events(bytes.length);
      if (r === Status.CORRUPT) return { records: -1, corruptAt: Number(this.#u64[c.result_ptr() >>> 3]!) };
      if (r < 0) throw statusError(r, "apply_events");
      return { records: r };
    });
  }

  /** Approximate mode: the last routed prompt went to (worker, rank) at `now` ms; its blocks live `ttlMs` (sliding). */
  recordRoute(worker: string, dpRank: number, now: number, ttlMs = this.options.approxTtlMs): number {
    const slot = this.slotFor(worker, dpRank);
    return this.#guard("record_route", (c) => {
      const r = c.record_route(slot, c.last_blocks(), now, ttlMs);
      if (r < 0) throw statusError(r, "record_route");
      return r;
    });
  }

  /**
   * Approximate mode for a decision made elsewhere (a router replica): its prompt's sequence hashes as (lo, hi) u32 pairs
   * are written where the core keeps the last prompt's, then recorded like recordRoute. Returns the blocks recorded.
   */
  recordSequenceWords(worker: string, dpRank: number, words: Uint32Array, now: number, ttlMs = this.options.approxTtlMs): number {
    const n = words.length >>> 1;
    if (n === 0) return 0;
    const slot = this.slotFor(worker, dpRank);
    return this.#guard("record_route", (c) => {
      if (n > c.blocks_cap()) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${n} blocks exceed the prompt capacity ${c.blocks_cap()}`);
      this.#u32.set(words.subarray(0, 2 * n), c.seq_ptr() >>> 2);
      const r = c.record_route(slot, n, now, ttlMs);
      if (r < 0) throw statusError(r, "record_route");
      return r;
    });
  }

  /**
   * After a recordRoute: for each of the prompt's first `n` blocks, how many blocks routed to its rank ago the least
   * recently routed of blocks 0..i was routed before (0xFFFFFFFF from the first block the rank did not hold; see NEEDS
   * in docs/abi.md). An engine that missed block i has an LRU cache no larger than that, plus what came since.
   */
  lastRecordNeeds(n: number): Uint32Array {
    return this.#guard("needs", (c) => {
      if (!(n >= 0 && n <= c.blocks_cap())) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${n} blocks exceed the prompt capacity ${c.blocks_cap()}`);
      const p = c.needs_ptr() >>> 2;
      return this.#u32.slice(p, p + n);
    });
  }

  /** A slot's recency clock: blocks recorded on it so far, wrapping at 2^32 (see slot_clock in docs/abi.md). */
  slotClockOf(slot: number): number {
    return this.#guard("slot_clock", (c) => c.slot_clock(slot) >>> 0);
  }

  /** Drops approximate blocks whose TTL ran out by `now`; returns how many. */
  expire(now: number): number {
    return this.#guard("expire", (c) => c.expire(now));
  }

  /**
   * Approximate mode: (worker, rank) keeps at most `blocks` routed blocks, its least recently routed dropped first, as
   * the engine's LRU cache would (0: only the TTLs bound them). Returns the blocks dropped at once.
   */
  setSlotCapacity(worker: string, dpRank: number, blocks: number): number {
    if (!Number.isInteger(blocks) || blocks < 0 || blocks > 0x7fffffff) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `slot capacity ${blocks} is not a block count`);
    const slot = this.slotFor(worker, dpRank);
    return this.#guard("slot_capacity", (c) => {
      const r = c.slot_capacity(slot, blocks);
      if (r < 0) throw statusError(r, "slot_capacity");
      return r;
    });
  }

  /**
   * Scoring-region access for the selection kernel (see score-kernel.ts). A caller that keeps inputs in the columns
   * between requests passes itself as `owner` and asks `scoreColumnsKept(owner)` first: any other caller, memory
   * growth or a rebuild after a trap makes that false.
   */
  scoreColumns(owner?: object): ScoreColumns {
    const view = this.#guard("score", (c) => {
      // Cached until memory grows: the selector calls this once per request.
      this.#scoreView ??= { f64: this.#f64, base: c.score_ptr() >>> 3, stride: this.options.maxSlots, run: c.score.bind(c) };
      return this.#scoreView;
    });
    this.#scoreOwner = owner;
    return view;
  }

  /** Whether the score columns hold what `owner` left there (nobody else has had them since its last scoreColumns). */
  scoreColumnsKept(owner: object): boolean {
    return this.#scoreOwner === owner && this.#core.memory.buffer === this.#buffer;
  }

  /**
   * The core's counters since this index was made. The core keeps u32s, which wrap (the memo's within hours at
   * full rate) and restart at zero when a trap rebuilds it: each read folds the change since the last one, modulo
   * 2^32, into totals here, so these never go back. Read them at least once per 2^32 events (the gateway's tick does).
   */
  counters(): Record<CounterName, number> {
    return this.#guard("counters", (c) => {
      const base = c.counters_ptr() >>> 2;
      const out = {} as Record<CounterName, number>;
      for (const [k, i] of Object.entries(Counter)) {
        const cur = this.#u32[base + i]!;
        this.#counterTotals[i] = this.#counterTotals[i]! + ((cur - this.#counterLast[i]!) >>> 0);
        this.#counterLast[i] = cur;
        out[k as CounterName] = this.#counterTotals[i]!;
      }
      return out;
    });
  }

  stats(): { entries: number; nodes: number; ttlEntries: number; heapItems: number; memoryBytes: number; wasmBytes: number } {
    return this.#guard("stats", (c) => ({
      entries: c.entries(), nodes: c.nodes(), ttlEntries: c.ttl_entries(), heapItems: c.heap_items(),
      memoryBytes: c.memory_used(), wasmBytes: c.memory.buffer.byteLength,
    }));
  }

  /**
   * Runs `fn` against the core under the trap guard (a trap rebuilds the instance, bumps `generation` and throws
   * WasmTrapError), with the index's views fresh on entry. For code that drives core regions of its own: in-core
   * decoding of engine batches (kv-index-engine-batch.ts), and the test and bench helpers.
   */
  withCore<T>(what: string, fn: (core: CoreExports) => T): T {
    return this.#guard(what, fn);
  }
}

export { ScoreCol };

/** Grows the prompt regions (tokens and blocks alike) to hold `need`, at least doubling, within `max` tokens. */
export function growPrompt(c: CoreExports, need: number, max: number): void {
  if (need > max) throw new KvgateError("KVGATE_ERR_PROMPT_TOO_LONG", `prompt of ${need} tokens exceeds maxPromptTokens ${max}`);
  const next = Math.min(max, Math.max(need, c.tokens_cap() * 2));
  const st = c.grow_prompt(next, next);
  if (st !== Status.OK) throw statusError(st, "grow_prompt");
}

export function statusError(st: number, what: string): KvgateError {
  switch (st) {
    case Status.NO_MEMORY: return new KvgateError("KVGATE_ERR_NO_MEMORY", `${what}: memory budget exhausted`);
    case Status.BAD_ARG: return new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${what}: invalid argument`);
    case Status.BAD_SLOT: return new KvgateError("KVGATE_ERR_UNKNOWN_WORKER", `${what}: unknown worker slot`);
    case Status.CAPACITY: return new KvgateError("KVGATE_ERR_CAPACITY", `${what}: index capacity reached`);
    case Status.TOO_LONG: return new KvgateError("KVGATE_ERR_PROMPT_TOO_LONG", `${what}: prompt too long`);
    case Status.CORRUPT: return new KvgateError("KVGATE_ERR_CORRUPT_EVENT", `${what}: corrupt event batch`);
    default: return new KvgateError("KVGATE_ERR_STATE", `${what}: unexpected status ${st}`);
  }
}
