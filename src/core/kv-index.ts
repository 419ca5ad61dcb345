/** @module KvIndex: owns one WASM core instance, its memory views and slot map, and turns status codes and traps into typed errors. */
import { Counter, ScoreCol, Status, type CoreExports, type CounterName } from "../wasm/abi.ts";
import { instantiateCore } from "../wasm/instantiate.ts";
import { KvgateError, WasmTrapError } from "./errors.ts";
import { SlotMap, type SlotKey } from "./slot-map.ts";
import { budgetBytes, resolveOptions, type KvIndexOptions, type ResolvedKvIndexOptions } from "./kv-index-options.ts";
import { HashSeeds, type HashOptions } from "./hash-seeds.ts";

export type { HashOptions } from "./hash-seeds.ts";

export interface BlockMatch extends SlotKey {
  /** Contiguous leading blocks of the prompt the slot holds. */
  blocks: number;
  /** Blocks the slot holds in the index (tie-breaker). */
  treeSize: number;
}

export interface OverlapScores {
  /** Complete blocks in the prompt. */
  blocks: number;
  matches: BlockMatch[];
}

export type StoreOutcome = "applied" | "parent_not_found" | "invalid_sequence" | "capacity";

export interface StoredBlock {
  /** The engine's block hash: an opaque id used by later Removed events and as the parent of the next Stored. */
  hash: bigint;
  /** The router's local (content) hash of the block's tokens. */
  local: bigint;
}

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
  onReset?: (error: WasmTrapError) => void;

  #module: WebAssembly.Module;
  #core!: CoreExports;
  #seeds!: HashSeeds;
  #buffer: ArrayBuffer | SharedArrayBuffer | undefined;
  #u8!: Uint8Array;
  #u32!: Uint32Array;
  #u64!: BigUint64Array;
  #f64!: Float64Array;
  /** Region offsets fixed at init (in u32 units), read once so hot accessors make no WASM call. */
  #outU32 = 0;
  #sizesU32 = 0;
  #scoreView: ScoreColumns | undefined;

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
    this.#core = core;
    this.#buffer = undefined;
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
    this.#outU32 = this.#core.out_ptr() >>> 2;
    this.#sizesU32 = this.#core.sizes_ptr() >>> 2;
    this.#scoreView = undefined;
  }

  /** Runs `fn` against the core; a trap rebuilds the instance and surfaces as WasmTrapError. */
  #guard<T>(what: string, fn: (core: CoreExports) => T): T {
    try {
      this.#views();
      return fn(this.#core);
    } catch (e) {
      if (!(e instanceof WebAssembly.RuntimeError) && !(e instanceof Error && e.message.startsWith("abort:"))) throw e;
      this.generation++;
      const err = new WasmTrapError(`WASM core trapped in ${what}: ${(e as Error).message}; index rebuilt empty`, this.generation, e);
      this.#boot();
      this.onReset?.(err);
      throw err;
    }
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
    const max = this.options.maxPromptTokens;
    if (need > max) throw new KvgateError("KVGATE_ERR_PROMPT_TOO_LONG", `prompt of ${need} tokens exceeds maxPromptTokens ${max}`);
    const next = Math.min(max, Math.max(need, c.tokens_cap() * 2));
    const st = c.grow_prompt(next, next);
    if (st !== Status.OK) throw statusError(st, "grow_prompt");
    this.#views();
  }

  #hashCall(c: CoreExports, tokens: ArrayLike<number>, opts: HashOptions, fn: "hash_prompt" | "route"): number {
    const nMm = this.#loadPrompt(c, tokens, opts);
    const [lo, hi] = this.#seeds.parts(opts.lora, opts.namespace);
    const r = c[fn](tokens.length, opts.blockSize, lo, hi, opts.eagle ? 1 : 0, nMm);
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
   * Hot path: hashes the prompt and matches it in one crossing. Returns how many slots matched; read them with
   * `matchSlot(i)` / `matchDepth(i)` before the next call. `lastBlocks` tells the prompt's block count.
   */
  route(tokens: ArrayLike<number>, opts: HashOptions): number {
    return this.#guard("route", (c) => this.#hashCall(c, tokens, opts, "route"));
  }

  /** Hashes the prompt only (block count returned); `matchLast()` then matches it. For callers timing the phases apart. */
  hashOnly(tokens: ArrayLike<number>, opts: HashOptions): number {
    return this.#guard("hash_prompt", (c) => this.#hashCall(c, tokens, opts, "hash_prompt"));
  }

  /** Matches the last hashed prompt; same result form as `route`. */
  matchLast(): number {
    return this.#guard("find_matches", (c) => {
      const n = c.find_matches(c.last_blocks());
      if (n < 0) throw statusError(n, "find_matches");
      return n;
    });
  }

  /**
   * Copies the last hashed prompt's sequence hashes into `out` (no BigInt is created) and returns how many; `out`
   * must hold `lastBlocks` values. Read them as u32 pairs through `new Uint32Array(out.buffer)` to stay BigInt-free.
   */
  lastSequenceHashesInto(out: BigUint64Array): number {
    return this.#guard("seq", (c) => {
      const n = c.last_blocks();
      if (out.length < n) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `need room for ${n} hashes, got ${out.length}`);
      const sp = c.seq_ptr() >>> 3;
      out.set(this.#u64.subarray(sp, sp + n));
      return n;
    });
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

  /** Tree size by slot number (no string key built). */
  treeSizeOfSlot(slot: number): number {
    return this.#treeSize(slot);
  }

  matchSlot(i: number): number {
    return this.#u32[this.#outU32 + 2 * i]!;
  }

  matchDepth(i: number): number {
    return this.#u32[this.#outU32 + 2 * i + 1]!;
  }

  get lastBlocks(): number {
    return this.#core.last_blocks();
  }

  /** Benchmark floor only: copies `tokens` into the TOKENS region as `route` does, and does nothing else. */
  copyTokensForBench(tokens: Uint32Array): void {
    this.#guard("copy_tokens", (c) => {
      if (tokens.length > c.tokens_cap()) this.#growPrompt(c, tokens.length);
      this.#u32.set(tokens, c.tokens_ptr() >>> 2);
    });
  }

  /** Sequence hashes of the last hashed prompt (a copy). */
  lastSequenceHashes(): bigint[] {
    return this.#guard("seq", (c) => {
      const sp = c.seq_ptr() >>> 3;
      return Array.from(this.#u64.subarray(sp, sp + c.last_blocks()));
    });
  }

  /** Overlap of a prompt with every slot, as objects (friendly form of `route`). */
  findMatches(tokens: ArrayLike<number>, opts: HashOptions): OverlapScores {
    const n = this.route(tokens, opts);
    return { blocks: this.lastBlocks, matches: this.#collect(n) };
  }

  /** Overlap for already-computed sequence hashes. */
  findMatchesByHashes(seq: ArrayLike<bigint>): OverlapScores {
    return this.#guard("find_matches", (c) => {
      if (seq.length > c.blocks_cap()) this.#growPrompt(c, seq.length);
      const sp = c.seq_ptr() >>> 3;
      for (let i = 0; i < seq.length; i++) this.#u64[sp + i] = BigInt.asUintN(64, seq[i]!);
      const n = c.find_matches(seq.length);
      if (n < 0) throw statusError(n, "find_matches");
      return { blocks: seq.length, matches: this.#collect(n) };
    });
  }

  #collect(n: number): BlockMatch[] {
    const out: BlockMatch[] = [];
    for (let i = 0; i < n; i++) {
      const slot = this.matchSlot(i);
      const key = this.slots.at(slot);
      if (key) out.push({ ...key, blocks: this.matchDepth(i), treeSize: this.#treeSize(slot) });
    }
    return out;
  }

  #treeSize(slot: number): number {
    this.#views();
    return this.#u32[this.#sizesU32 + slot]!;
  }

  /** Blocks (worker, rank) holds in the index; 0 for an unknown pair. */
  treeSize(worker: string, dpRank = 0): number {
    const slot = this.slots.get(worker, dpRank);
    return slot === undefined ? 0 : this.#treeSize(slot);
  }

  /** The slot of (worker, rank), opening it in the core the first time. */
  slotFor(worker: string, dpRank = 0): number {
    const { slot, fresh } = this.slots.acquire(worker, dpRank);
    if (fresh) this.#guard("slot_open", (c) => c.slot_open(slot));
    return slot;
  }

  /** Applies a Stored event: blocks extend `parent` (an engine hash of the same worker rank) or start a prompt. */
  stored(worker: string, dpRank: number, parent: bigint | null, blocks: readonly StoredBlock[]): StoreOutcome {
    const slot = this.slotFor(worker, dpRank);
    return this.#guard("store_blocks", (c) => {
      const cap = c.io_cap();
      let outcome: StoreOutcome = "applied";
      for (let start = 0; start < blocks.length || start === 0; start += cap) {
        const part = blocks.slice(start, start + cap);
        const p = start === 0 ? parent : blocks[start - 1]!.hash;
        const io = c.io_ptr() >>> 3;
        for (let i = 0; i < part.length; i++) {
          this.#u64[io + 2 * i] = BigInt.asUintN(64, part[i]!.hash);
          this.#u64[io + 2 * i + 1] = BigInt.asUintN(64, part[i]!.local);
        }
        const pv = p === null ? 0n : BigInt.asUintN(64, p);
        const st = c.store_blocks(slot, p === null ? 0 : 1, Number(pv & 0xffffffffn) | 0, Number(pv >> 32n) | 0, part.length);
        outcome = storeOutcome(st);
        if (outcome !== "applied" || blocks.length === 0) break;
      }
      return outcome;
    });
  }

  /** Applies a Removed event; returns how many hashes the index did not know (they are skipped). */
  removed(worker: string, dpRank: number, hashes: readonly bigint[]): number {
    const slot = this.slots.get(worker, dpRank);
    if (slot === undefined) return hashes.length;
    return this.#guard("remove_blocks", (c) => {
      const cap = 2 * c.io_cap();
      let unknown = 0;
      for (let start = 0; start < hashes.length; start += cap) {
        const part = hashes.slice(start, start + cap);
        const io = c.io_ptr() >>> 3;
        for (let i = 0; i < part.length; i++) this.#u64[io + i] = BigInt.asUintN(64, part[i]!);
        const st = c.remove_blocks(slot, part.length);
        if (st < 0) throw statusError(st, "remove_blocks");
        unknown += st;
      }
      return unknown;
    });
  }

  /** Applies a Cleared event: every block of every rank of `worker`; the worker stays known. */
  cleared(worker: string): void {
    for (const slot of this.slots.slotsOf(worker)) this.#guard("clear_slot", (c) => c.clear_slot(slot));
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

  /** Approximate mode with explicit sequence hashes (position i = depth i). */
  recordHashes(worker: string, dpRank: number, seq: ArrayLike<bigint>, now: number, ttlMs = this.options.approxTtlMs): number {
    const slot = this.slotFor(worker, dpRank);
    return this.#guard("record_route", (c) => {
      if (seq.length > c.blocks_cap()) this.#growPrompt(c, seq.length);
      const sp = c.seq_ptr() >>> 3;
      for (let i = 0; i < seq.length; i++) this.#u64[sp + i] = BigInt.asUintN(64, seq[i]!);
      const r = c.record_route(slot, seq.length, now, ttlMs);
      if (r < 0) throw statusError(r, "record_route");
      return r;
    });
  }

  /** Drops approximate blocks whose TTL ran out by `now`; returns how many. */
  expire(now: number): number {
    return this.#guard("expire", (c) => c.expire(now));
  }

  /** Scoring-region access for the selection kernel (see score-kernel.ts). */
  scoreColumns(): ScoreColumns {
    return this.#guard("score", (c) => {
      // Cached until memory grows: the selector calls this once per request.
      this.#scoreView ??= { f64: this.#f64, base: c.score_ptr() >>> 3, stride: this.options.maxSlots, run: c.score.bind(c) };
      return this.#scoreView;
    });
  }


  counters(): Record<CounterName, number> {
    return this.#guard("counters", (c) => {
      const base = c.counters_ptr() >>> 2;
      const out = {} as Record<CounterName, number>;
      for (const [k, i] of Object.entries(Counter)) out[k as CounterName] = this.#u32[base + i]!;
      return out;
    });
  }

  stats(): { entries: number; nodes: number; ttlEntries: number; heapItems: number; memoryBytes: number; wasmBytes: number } {
    return this.#guard("stats", (c) => ({
      entries: c.entries(), nodes: c.nodes(), ttlEntries: c.ttl_entries(), heapItems: c.heap_items(),
      memoryBytes: c.memory_used(), wasmBytes: c.memory.buffer.byteLength,
    }));
  }

  // ---- Engine batch ingest (src/core/kv-index-engine-batch.ts) -------------------------------------------------
  /**
   * Runs `fn` against the core under the trap guard (a trap rebuilds the instance, bumps `generation` and throws
   * WasmTrapError). For in-core decoding of engine KV-event batches, which keeps its own regions and views.
   */
  withCore<T>(what: string, fn: (core: CoreExports) => T): T {
    return this.#guard(what, fn);
  }
  // ---- end engine batch ingest ----------------------------------------------------------------------------------

  /** Fault injection for tests of the recovery path. */
  induceTrap(): never {
    this.#guard("debug_trap", (c) => c.debug_trap());
    throw new KvgateError("KVGATE_ERR_STATE", "debug_trap returned");
  }
}

export { ScoreCol };

function storeOutcome(st: number): StoreOutcome {
  switch (st) {
    case Status.OK: return "applied";
    case Status.PARENT_NOT_FOUND: return "parent_not_found";
    case Status.INVALID_SEQUENCE: return "invalid_sequence";
    case Status.CAPACITY: return "capacity";
    default: throw statusError(st, "store_blocks");
  }
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
