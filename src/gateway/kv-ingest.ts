/**
 * @module KV-event ingest over HTTP: one vLLM msgpack KVEventBatch per POST (the sim's HttpPushSink contract:
 * `x-kvgate-worker`, `x-kvgate-dp-rank`, `x-kvgate-seq`), translated into the core's binary batch and applied in
 * one call. Sequence numbers drop duplicates, count gaps, and a return to 0 (a restarted engine) clears the rank.
 */
import { EventBatchWriter } from "../core/event-encoder.ts";
import { KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import { decodeKvEventBatch } from "../sim/kv-event-decode.ts";
import type { Fleet } from "./fleet.ts";
import type { GatewayMetrics } from "./gateway-metrics.ts";

export interface IngestInput {
  worker: string;
  /** From the header; the batch's own data_parallel_rank wins when present. */
  dpRank?: number;
  seq?: number;
  bytes: Uint8Array;
}

export interface IngestResult {
  result: "applied" | "ignored" | "duplicate";
  events: number;
  /** Batches the sequence numbers say were lost before this one. */
  gap: number;
  restarted: boolean;
  /** Events skipped before the index: a non-GPU medium or a block size other than the worker's. */
  skipped: number;
}

export class KvIngest {
  readonly #lastSeq = new Map<string, number>();
  readonly #writer = new EventBatchWriter(1 << 16);

  constructor(private readonly index: KvIndex, private readonly fleet: Fleet, private readonly metrics: GatewayMetrics) {}

  ingest(input: IngestInput): IngestResult {
    const w = this.fleet.get(input.worker);
    if (!w) {
      this.metrics.kvBatches.inc({ result: "unknown_worker" });
      throw new KvgateError("KVGATE_ERR_UNKNOWN_WORKER", `unknown worker ${input.worker}`, { worker: input.worker });
    }
    let batch;
    try {
      batch = decodeKvEventBatch(input.bytes);
    } catch (e) {
      this.metrics.kvBatches.inc({ result: "corrupt" });
      throw e;
    }
    const rank = batch.data_parallel_rank ?? input.dpRank ?? w.dpStart;
    if (!Number.isInteger(rank) || rank < w.dpStart || rank >= w.dpStart + w.dpSize) {
      this.metrics.kvBatches.inc({ result: "bad_rank" });
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${w.id} has no dp rank ${rank}`, { worker: w.id });
    }
    const out: IngestResult = { result: "applied", events: batch.events.length, gap: 0, restarted: false, skipped: 0 };
    if (!w.kvEvents) {
      // The worker is routed on kvgate's own decisions; its events would hash other tokens (see README, modes).
      this.metrics.kvBatches.inc({ result: "ignored" });
      return { ...out, result: "ignored" };
    }
    const key = `${w.id}\u0000${rank}`;
    const last = this.#lastSeq.get(key);
    const seq = input.seq;
    if (seq !== undefined && last !== undefined) {
      if (seq === 0 && last > 0) out.restarted = true;
      else if (seq <= last) {
        this.metrics.kvBatches.inc({ result: "duplicate" });
        return { ...out, result: "duplicate" };
      } else if (seq > last + 1) out.gap = seq - last - 1;
    }
    if (seq !== undefined) this.#lastSeq.set(key, seq);
    const slot = this.index.slotFor(w.id, rank);
    const wr = this.#writer;
    wr.reset();
    if (out.restarted) wr.cleared(slot);
    for (const ev of batch.events) {
      this.metrics.kvEvents.inc({ event_type: ev.type === "BlockStored" ? "stored" : ev.type === "BlockRemoved" ? "removed" : "cleared" });
      if (ev.type === "AllBlocksCleared") {
        wr.cleared(slot);
        continue;
      }
      if (ev.medium !== null && ev.medium !== "GPU") {
        out.skipped++;
        continue;
      }
      if (ev.type === "BlockRemoved") {
        wr.removed(slot, ev.block_hashes);
      } else if (ev.block_size !== w.blockSize || ev.token_ids.length !== ev.block_hashes.length * w.blockSize) {
        out.skipped++;
      } else {
        const seed = this.index.seedFor({ lora: ev.lora_name ?? undefined });
        wr.storedTokens(slot, ev.parent_block_hash, ev.block_hashes, ev.token_ids, w.blockSize, seed);
      }
      if (wr.byteLength > this.index.options.eventBytes >> 1) this.#flush();
    }
    this.#flush();
    this.metrics.kvBatches.inc({ result: out.restarted ? "restart" : out.gap > 0 ? "gap" : "ok" });
    if (out.skipped > 0) this.metrics.kvApplied.inc({ status: "skipped" }, out.skipped);
    return out;
  }

  /** Forgets a removed worker's sequence numbers (a worker re-added under the same id starts over). */
  forget(worker: string): void {
    for (const k of this.#lastSeq.keys()) if (k.startsWith(`${worker}\u0000`)) this.#lastSeq.delete(k);
  }

  #flush(): void {
    const wr = this.#writer;
    if (wr.records === 0) return;
    const before = this.index.counters();
    const r = this.index.applyBatch(wr.bytes());
    this.metrics.eventCounters(before, this.index.counters());
    wr.reset();
    if (r.corruptAt !== undefined) throw new KvgateError("KVGATE_ERR_STATE", `the core rejected kvgate's own event batch at byte ${r.corruptAt}`);
  }
}
