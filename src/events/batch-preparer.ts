/**
 * @module Turns one engine KVEventBatch payload into index records for one worker under the ingest policy: in the WASM
 * core when it can, else with the TypeScript decoder, which gives the same records (docs/kv-events.md#decoding).
 */
import { KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import type { SlotKey } from "../core/slot-map.ts";
import { EngineBatchCodec, setSlots, type CoreDecodedBatch, type EngineBatchPolicy } from "../core/kv-index-engine-batch.ts";
import { BASE_SEED } from "../core/hash-seeds.ts";
import { CacheSalts } from "../core/cache-salt.ts";
import { BinaryBatchBuilder } from "./binary-batch-builder.ts";
import { readKvEventBatch } from "./batch-reader.ts";
import { EventScratch, TAG_CLEARED, TAG_REMOVED, TAG_STORED } from "./event-scratch.ts";
import { deltaFromWords, emptyDelta, type BatchDelta } from "./ingest-counters.ts";
import { indexesTier, tierOf, type IngestPolicy } from "./ingest-policy.ts";
import { corruptEvent, MsgpackCursor } from "./msgpack-cursor.ts";

/** Ranks beyond this are refused as corrupt rather than opening index slots for them. */
const MAX_DP_RANK = 4095;
const MAX_SEEDS = 1024;
const FULL_ATTENTION = "full_attention";
/** The local-hash seed without LoRA or namespace, as (low, high) words. */
const BASE_SEED_PARTS = [Number(BASE_SEED & 0xffffffffn), Number(BASE_SEED >> 32n)] as const;

export interface PreparedBatch {
  /** Data-parallel rank the batch applies to (the batch's own, else the stream's). */
  rank: number;
  slot: number;
  /** Binary records written (0: nothing to apply, e.g. only filtered events). */
  records: number;
  events: number;
  /** The batch holds an AllBlocksCleared. */
  clears: boolean;
  delta: BatchDelta;
}

export interface BatchPreparerOptions {
  /** Decode in the core when it can (default true); false keeps every batch on the TypeScript decoder. */
  coreDecode?: boolean;
}

/** A prepared batch's records held outside the preparer (see `snapshot`). */
export interface RecordSnapshot {
  bytes: Uint8Array;
  starts: number[];
}

/** Batches each decoder handled. */
export interface DecoderStats {
  core: number;
  host: number;
}

export class BatchPreparer {
  readonly builder: BinaryBatchBuilder;
  /** Separate from `builder`, which may hold a prepared batch while its worker is being cleared. */
  readonly #clearBuilder: BinaryBatchBuilder;
  readonly #cursor = new MsgpackCursor();
  readonly #scratch = new EventScratch();
  readonly #seeds = new Map<string, readonly [number, number]>();
  readonly #salts: CacheSalts;
  #locals = new Uint32Array(256);
  #delta: BatchDelta = emptyDelta();
  #hasClear = false;
  /** Policy facts read per event, hoisted. */
  readonly #device: boolean;
  readonly #group: number;
  readonly #onEvent = (e: EventScratch): void => this.#event(e);
  readonly #codec: EngineBatchCodec | undefined;
  readonly #corePolicy: EngineBatchPolicy;
  /** The last batch the core decoded and still holds (null: the builder holds the prepared records). */
  #core: { batch: CoreDecodedBatch; slot: number; payload: Uint8Array } | null = null;
  readonly stats: DecoderStats = { core: 0, host: 0 };
  /** Stored events whose tokens came as EAGLE bigrams (the engine runs EAGLE speculative decoding). */
  eagleEvents = 0;
  /** What went wrong applying the last `prepareApply` batch (undefined: nothing). */
  applyError: unknown = undefined;
  /** The batch `prepareApply` returns for core-decoded payloads (reused). */
  readonly #applied: PreparedBatch = { rank: 0, slot: 0, records: 0, events: 0, clears: false, delta: emptyDelta() };
  readonly #slotOf = (rank: number | null): number => {
    const r = rank ?? this.defaultRank;
    if (r > MAX_DP_RANK) throw corruptEvent(`dp rank ${r}`);
    // The last rank's slot, while the index still maps it to this worker (no key string and map lookup per batch).
    const c = this.#lastSlot;
    if (c !== undefined && c.rank === r && this.index.slots.at(c.slot) === c.key) return c.slot;
    const slot = this.index.slotFor(this.worker, r);
    this.#lastSlot = { rank: r, slot, key: this.index.slots.at(slot) };
    return slot;
  };
  #lastSlot: { rank: number; slot: number; key: SlotKey | undefined } | undefined;

  constructor(readonly index: KvIndex, readonly worker: string, readonly defaultRank: number, readonly policy: IngestPolicy,
    options: BatchPreparerOptions = {}) {
    this.#device = indexesTier(policy, "device");
    this.#salts = new CacheSalts((b, seed) => index.xxh3(b, seed));
    this.#group = policy.kvGroup ?? -1;
    const limits = { maxBytes: index.options.eventBytes, maxBlocks: index.options.eventBlocks };
    this.builder = new BinaryBatchBuilder(limits);
    this.#clearBuilder = new BinaryBatchBuilder(limits);
    this.#codec = options.coreDecode === false ? undefined : EngineBatchCodec.for(index);
    this.#corePolicy = {
      blockSize: policy.blockSize, kvGroup: this.#group, indexDevice: this.#device,
      dropForeignExtraKeys: policy.dropForeignExtraKeys, seedLo: BASE_SEED_PARTS[0], seedHi: BASE_SEED_PARTS[1],
    };
  }

  /**
   * Decodes `payload` into the builder. Throws KVGATE_ERR_CORRUPT_EVENT for malformed input (builder emptied, index
   * untouched) and KVGATE_ERR_SLOTS_EXHAUSTED when the index has no slot left for a new rank.
   */
  prepare(payload: Uint8Array): PreparedBatch {
    this.builder.reset();
    this.#core = null;
    const fast = this.#codec?.decode(payload, this.#corePolicy);
    if (fast !== undefined && typeof fast !== "string") return this.#fromCore(fast, payload);
    return this.#prepareHost(payload);
  }

  /** The TypeScript decoder, for batches the core declined (or found corrupt: this then throws the precise reason). */
  #prepareHost(payload: Uint8Array): PreparedBatch {
    this.builder.reset();
    this.#core = null;
    this.#delta = emptyDelta();
    this.#hasClear = false;
    try {
      const env = readKvEventBatch(this.#cursor, payload, this.#scratch, this.#onEvent);
      const rank = env.rank ?? this.defaultRank;
      if (rank > MAX_DP_RANK) throw corruptEvent(`dp rank ${rank}`);
      const slot = this.index.slotFor(this.worker, rank);
      this.builder.setSlot(slot);
      this.stats.host++;
      return { rank, slot, records: this.builder.records, events: env.events, clears: this.#hasClear, delta: this.#delta };
    } catch (e) {
      this.builder.reset();
      throw e;
    }
  }

  /**
   * `prepare` then `apply` for a batch applied at once (the live, in-order path): the core decodes and applies in a
   * row, with no copy of its records kept for a later apply. Throws as `prepare` does, before anything is applied;
   * an error while applying is left in `applyError` instead (the batch counts as applied). The returned batch and
   * its delta are reused by the next call.
   */
  prepareApply(payload: Uint8Array): PreparedBatch {
    this.applyError = undefined;
    this.#core = null;
    const codec = this.#codec;
    if (codec !== undefined) {
      const b = codec.decodeApply(payload, this.#corePolicy, this.#slotOf);
      if (typeof b !== "string") {
        this.applyError = b.applyError;
        this.stats.core++;
        const out = this.#applied;
        deltaFromWords(out.delta, b.deltaWords, b.deltaAt);
        out.rank = b.rank ?? this.defaultRank;
        out.slot = b.slot;
        out.records = b.records;
        out.events = b.events;
        out.clears = b.clears;
        return out;
      }
    }
    const batch = this.#prepareHost(payload);
    try {
      if (batch.records > 0) this.apply();
    } catch (e) {
      this.applyError = e;
    }
    return batch;
  }

  #fromCore(b: CoreDecodedBatch, payload: Uint8Array): PreparedBatch {
    const rank = b.rank ?? this.defaultRank;
    if (rank > MAX_DP_RANK) throw corruptEvent(`dp rank ${rank}`);
    const delta = deltaFromWords(emptyDelta(), b.deltaWords, b.deltaAt);
    const slot = this.index.slotFor(this.worker, rank);
    this.#core = { batch: b, slot, payload };
    this.stats.core++;
    return { rank, slot, records: b.records, events: b.events, clears: b.clears, delta };
  }

  /** Applies the last prepared batch (or a restored snapshot). */
  apply(): void {
    const core = this.#core;
    if (!core) return this.#applyChunks(this.builder);
    this.#core = null;
    const codec = this.#codec!;
    if (!codec.holds(core.batch.ticket)) {
      // Another stream decoded into the shared core since, or a trap rebuilt it: decode again (same records).
      const again = codec.decode(core.payload, this.#corePolicy);
      if (typeof again === "string") throw new KvgateError("KVGATE_ERR_STATE", `engine batch no longer decodes in the core (${again})`);
      core.batch = again;
    }
    codec.apply(core.batch, core.slot);
  }

  /** An independent copy of the last prepared batch's records (for batches held while a replay runs). */
  snapshot(): RecordSnapshot {
    const core = this.#core;
    if (!core) return this.builder.snapshot();
    if (!this.#codec!.holds(core.batch.ticket)) {
      const again = this.#codec!.decode(core.payload, this.#corePolicy);
      if (typeof again === "string") throw new KvgateError("KVGATE_ERR_STATE", `engine batch no longer decodes in the core (${again})`);
      core.batch = again;
    }
    const bytes = this.#codec!.copyRecords(core.batch, core.slot);
    return { bytes, starts: setSlots(bytes, core.slot) };
  }

  /** Makes a snapshot the batch `apply` applies next. */
  restore(snap: RecordSnapshot): void {
    this.#core = null;
    this.builder.restore(snap);
  }

  /** Drops every entry of the given slots (the worker's ranks) without touching the prepared batch. */
  clearSlots(slots: Iterable<number>): void {
    const b = this.#clearBuilder;
    b.reset();
    for (const slot of slots) {
      b.cleared();
      b.setSlot(slot, b.records - 1);
    }
    this.#applyChunks(b);
  }

  #applyChunks(b: BinaryBatchBuilder): void {
    for (const chunk of b.chunks()) {
      const r = this.index.applyBatch(chunk);
      if (r.corruptAt !== undefined) {
        throw new KvgateError("KVGATE_ERR_STATE", `core refused a record kvgate encoded (offset ${r.corruptAt})`);
      }
    }
  }

  #event(e: EventScratch): void {
    const d = this.#delta;
    if (e.tag === TAG_CLEARED) {
      d.clearedEvents++;
      this.builder.cleared();
      this.#hasClear = true;
      return;
    }
    if (e.tag !== TAG_STORED && e.tag !== TAG_REMOVED) {
      d.unknownEvents++;
      return;
    }
    // GPU (or no medium) is nearly every event: counted without the name lookup.
    const m = e.medium;
    if (m === null || m === "GPU") {
      d.deviceEvents++;
      if (!this.#device) { d.droppedTier++; return; }
    } else {
      const tier = tierOf(m);
      if (tier === "device") d.deviceEvents++;
      else if (tier === "host") d.hostEvents++;
      else if (tier === "disk") d.diskEvents++;
      else d.externalEvents++;
      if (!indexesTier(this.policy, tier)) { d.droppedTier++; return; }
    }
    if ((e.specKind !== null && e.specKind !== FULL_ATTENTION) || (this.#group >= 0 && e.groupIdx >= 0 && e.groupIdx !== this.#group)) {
      d.droppedGroup++;
      return;
    }
    const n = e.nHashes;
    if (e.tag === TAG_REMOVED) {
      d.removedEvents++;
      d.blocksRemoved += n;
      this.builder.removed(e.hashes, n);
      return;
    }
    this.#stored(e, n, d);
  }

  #stored(e: EventScratch, n: number, d: BatchDelta): void {
    const tokens = e.eagle ? e.nTokens - 1 : e.nTokens;
    const bs = e.blockSize >= 0 ? e.blockSize : n > 0 && tokens % n === 0 ? tokens / n : -1;
    if (bs !== this.policy.blockSize) { d.droppedBlockSize++; return; }
    if (tokens !== n * bs) { d.droppedTokenCount++; return; }
    const lora = e.loraName || undefined;
    if (lora === undefined && e.loraId !== null) { d.droppedLora++; return; }
    if (e.foreignExtraKeys && this.policy.dropForeignExtraKeys) { d.droppedExtraKeys++; return; }
    d.storedEvents++;
    d.blocksStored += n;
    if (n === 0) return;
    if (e.eagle) this.eagleEvents++;
    if (e.eagle || e.cacheSalt !== null) {
      this.#storedHashed(e, n, bs, lora);
      return;
    }
    const [lo, hi] = this.#seed(lora);
    this.builder.storedTokens(e.hasParent, e.parent, e.hashes, n, e.tokens, bs, lo, hi);
  }

  /**
   * EAGLE blocks hash bs + 1 tokens each and a salted first block one more hash (the core's token record hashes bs
   * tokens alone), so local hashes are computed first.
   */
  #storedHashed(e: EventScratch, n: number, bs: number, lora: string | undefined): void {
    const opts = this.#salts.options(bs, lora, e.cacheSalt ?? undefined, e.eagle);
    const local = this.index.hash(e.tokens.subarray(0, e.nTokens), opts).local;
    if (local.length !== n) throw corruptEvent(`event of ${n} blocks hashed to ${local.length}`);
    if (this.#locals.length < 2 * n) this.#locals = new Uint32Array(2 * n);
    const l = this.#locals;
    for (let i = 0; i < n; i++) {
      const h = local[i]!;
      l[2 * i] = Number(h & 0xffffffffn);
      l[2 * i + 1] = Number(h >> 32n);
    }
    this.builder.stored(e.hasParent, e.parent, e.hashes, n, l);
  }

  #seed(lora: string | undefined): readonly [number, number] {
    if (lora === undefined) return BASE_SEED_PARTS;
    let p = this.#seeds.get(lora);
    if (!p) {
      const s = this.index.seedFor({ lora });
      p = [Number(s & 0xffffffffn), Number(s >> 32n)];
      if (this.#seeds.size >= MAX_SEEDS) this.#seeds.clear();
      this.#seeds.set(lora, p);
    }
    return p;
  }
}
