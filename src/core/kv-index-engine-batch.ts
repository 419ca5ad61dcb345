/**
 * @module In-core decoding of engine KV-event batches: the payload is copied into the core once, decoded and applied there,
 * and the shapes it declines go to the TypeScript decoder (docs/kv-events.md#decoding).
 */
import { IngestPolicyFlag, IngestStatus, Status, type CoreExports } from "../wasm/abi.ts";
import { ingestBytes } from "./kv-index-options.ts";
import { KvgateError } from "./errors.ts";
import type { KvIndex } from "./kv-index.ts";

/** What the core needs of the ingest policy, resolved once per stream. */
export interface EngineBatchPolicy {
  blockSize: number;
  /** -1: every group. */
  kvGroup: number;
  indexDevice: boolean;
  dropForeignExtraKeys: boolean;
  /** The local-hash seed (no LoRA) as unsigned 32-bit halves. */
  seedLo: number;
  seedHi: number;
}

/** Per-batch counters in the core's order (BatchDelta's keys, src/events/ingest-counters.ts). */
export const ENGINE_DELTA_KEYS = [
  "storedEvents", "removedEvents", "clearedEvents", "blocksStored", "blocksRemoved", "unknownEvents",
  "droppedBlockSize", "droppedTokenCount", "droppedTier", "droppedGroup", "droppedExtraKeys", "droppedLora",
  "deviceEvents", "hostEvents", "diskEvents", "externalEvents",
] as const;

export interface CoreDecodedBatch {
  /** Identifies this decode; records stay in the core until the next decode on the same index. */
  ticket: number;
  /** The batch's data-parallel rank; null when it names none. */
  rank: number | null;
  events: number;
  records: number;
  bytes: number;
  clears: boolean;
  /** Counters in ENGINE_DELTA_KEYS order: `deltaWords[deltaAt + i]` (core memory: read before the next decode). */
  deltaWords: Uint32Array;
  deltaAt: number;
  /** Set by `decodeApply`: the slot the records were applied to (-1 otherwise). */
  slot: number;
  /** Set by `decodeApply` when applying failed. */
  applyError: unknown;
}

/** Why the core did not decode a batch (the host decoder takes it in each case). */
export type CoreDecline = "fallback" | "corrupt" | "full" | "size" | "unavailable";

interface Regions {
  generation: number;
  buffer: ArrayBuffer | SharedArrayBuffer | undefined;
  u8: Uint8Array;
  f64: Float64Array;
  u32: Uint32Array;
  inPtr: number;
  inCap: number;
  outPtr: number;
  resultPtr: number;
}

/** One per KvIndex (its core is shared by every stream feeding it). */
export class EngineBatchCodec {
  static #byIndex = new WeakMap<KvIndex, EngineBatchCodec>();

  static for(index: KvIndex): EngineBatchCodec {
    let c = EngineBatchCodec.#byIndex.get(index);
    if (!c) EngineBatchCodec.#byIndex.set(index, (c = new EngineBatchCodec(index)));
    return c;
  }

  #r: Regions | undefined;
  #unavailable = false;
  #ticket = 0;
  /** The last outcome of `decode` that was not a success (diagnostics). */
  lastDecline: CoreDecline | undefined;

  private constructor(readonly index: KvIndex) {}

  /** Decodes `payload` in the core; the result, or why the host decoder must take it. Nothing is applied. */
  decode(payload: Uint8Array, p: EngineBatchPolicy): CoreDecodedBatch | CoreDecline {
    if (this.#unavailable) return "unavailable";
    return this.index.withCore("ingest_decode", (c) => {
      const r = this.#regions(c);
      if (!r) return "unavailable";
      if (payload.length > r.inCap) return "size";
      r.u8.set(payload, r.inPtr);
      const flags = (p.indexDevice ? IngestPolicyFlag.indexDevice : 0) | (p.dropForeignExtraKeys ? IngestPolicyFlag.dropForeignExtraKeys : 0);
      const st = c.ingest_decode(payload.length, p.blockSize, p.kvGroup, flags, p.seedLo | 0, p.seedHi | 0);
      this.#ticket++;
      if (st < 0) {
        const why: CoreDecline = st === Status.CORRUPT ? "corrupt" : st === IngestStatus.FALLBACK ? "fallback"
          : st === IngestStatus.FULL ? "full" : unexpected(st);
        this.lastDecline = why;
        return why;
      }
      const res = r.resultPtr;
      const rank = r.f64[res >>> 3]!;
      const w = (res >>> 2) + 2;
      return {
        ticket: this.#ticket, rank: rank < 0 ? null : rank, events: r.u32[w]!, records: r.u32[w + 1]!, bytes: r.u32[w + 2]!,
        clears: r.u32[w + 3] !== 0, deltaWords: r.u32, deltaAt: w + 4, slot: -1, applyError: undefined,
      };
    });
  }

  /**
   * Decodes `payload` and, when the core took it, applies its records to `slotOf(rank)` in the same core call: the
   * live in-order path, where nothing can come between the two. A throw from `slotOf` (bad rank, no slot left)
   * leaves the index untouched; an error while applying (a refusal, a trap) is returned in `applyError`, since the
   * batch then counts as applied all the same (as after a throw from `apply`).
   */
  decodeApply(payload: Uint8Array, p: EngineBatchPolicy, slotOf: (rank: number | null) => number): CoreDecodedBatch | CoreDecline {
    const b = this.decode(payload, p);
    if (typeof b === "string") return b;
    b.slot = slotOf(b.rank);
    try {
      this.apply(b, b.slot);
    } catch (e) {
      b.applyError = e;
    }
    return b;
  }

  /** Whether the records of `ticket` are still in the core (no decode since, no rebuild after a trap). */
  holds(ticket: number): boolean {
    return ticket === this.#ticket && this.#r?.generation === this.index.generation;
  }

  /** Applies the records of the last decode to `slot`. */
  apply(b: CoreDecodedBatch, slot: number): void {
    if (!this.holds(b.ticket)) throw new KvgateError("KVGATE_ERR_STATE", "decoded engine batch no longer in the core");
    this.index.withCore("ingest_apply", (c) => {
      const n = c.ingest_apply(slot, b.bytes);
      if (n === Status.CORRUPT) throw new KvgateError("KVGATE_ERR_STATE", "core refused records it decoded");
      if (n < 0) unexpected(n);
    });
  }

  /** A copy of the records of the last decode, slots set (for batches held while a replay runs). */
  copyRecords(b: CoreDecodedBatch, slot: number): Uint8Array {
    if (!this.holds(b.ticket)) throw new KvgateError("KVGATE_ERR_STATE", "decoded engine batch no longer in the core");
    return this.index.withCore("ingest_copy", (c) => {
      const r = this.#regions(c)!;
      const out = r.u8.slice(r.outPtr, r.outPtr + b.bytes);
      setSlots(out, slot);
      return out;
    });
  }

  /** Regions of the current core instance, reserved on first use and again after a rebuild. */
  #regions(c: CoreExports): Regions | undefined {
    let r = this.#r;
    if (!r || r.generation !== this.index.generation) {
      const size = ingestBytes(this.index.options);
      const st = c.ingest_reserve(size.input, size.output);
      if (st !== Status.OK) {
        // The page budget has no room: every batch takes the host path (correct, only slower).
        this.#unavailable = true;
        return undefined;
      }
      r = this.#r = {
        generation: this.index.generation, buffer: undefined, u8: new Uint8Array(0), f64: new Float64Array(0),
        u32: new Uint32Array(0), inPtr: c.ingest_in_ptr(), inCap: c.ingest_in_cap(), outPtr: c.ingest_out_ptr(),
        resultPtr: c.ingest_result_ptr(),
      };
    }
    const buf = c.memory.buffer;
    if (buf !== r.buffer) {
      r.buffer = buf;
      r.u8 = new Uint8Array(buf);
      r.f64 = new Float64Array(buf);
      r.u32 = new Uint32Array(buf);
    }
    return r;
  }
}

/** Walks binary records (format in event-encoder.ts) and returns their byte offsets, setting each one's slot. */
export function setSlots(bytes: Uint8Array, slot: number): number[] {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const starts: number[] = [];
  for (let off = 0; off + 16 <= bytes.length;) {
    starts.push(off);
    v.setUint32(off + 4, slot, true);
    const kind = bytes[off]!, n = v.getUint32(off + 8, true), aux = v.getUint32(off + 12, true);
    off += 16 + (kind === 1 ? 8 + 16 * n : kind === 2 ? 8 * n : kind === 4 ? 16 + 8 * n + Math.ceil((n * aux) / 2) * 8 : 0);
  }
  return starts;
}

function unexpected(st: number): never {
  throw new KvgateError("KVGATE_ERR_STATE", `ingest: unexpected core status ${st}`);
}
