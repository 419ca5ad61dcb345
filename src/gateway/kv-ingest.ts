/**
 * @module KV-event ingest over HTTP: one vLLM msgpack KVEventBatch per POST (the sim's HttpPushSink contract:
 * `x-kvgate-worker`, `x-kvgate-dp-rank`, `x-kvgate-seq`), fed into the same per-(worker, rank) streams the ZeroMQ
 * transport uses (src/events), so both obey one ingest policy and one sequence logic: duplicates dropped, a gap
 * clears the rank and marks it cold (HTTP has no replay socket), a sequence going back is an engine restart.
 */
import { KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import { emptyCounters, KvEventHub, type IngestCounters, type KvEventStream } from "../events/index.ts";
import type { Fleet } from "./fleet.ts";
import type { GatewayMetrics } from "./gateway-metrics.ts";

export interface IngestInput {
  worker: string;
  /** The publisher's rank (header); a batch's own data_parallel_rank wins inside the stream. */
  dpRank?: number;
  /** Without one, the batch is taken as the next in order. */
  seq?: number;
  bytes: Uint8Array;
}

export interface IngestResult {
  result: "applied" | "ignored" | "duplicate";
  /** Events in the batch (stored, removed, cleared). */
  events: number;
  /** Sequence gaps seen with this batch (lost batches: the rank was cleared and is cold). */
  gap: number;
  restarted: boolean;
  /** Events the ingest policy dropped: another block size or tier, foreign extra keys, unknown LoRA, … */
  skipped: number;
  /** The index holds only part of what this worker caches. */
  cold: boolean;
}

const SKIPS: readonly (keyof IngestCounters)[] = ["droppedBlockSize", "droppedTokenCount", "droppedTier", "droppedGroup", "droppedExtraKeys", "droppedLora", "unknownEvents"];

function delta(after: IngestCounters, before: IngestCounters): IngestCounters {
  const d = emptyCounters();
  for (const k of Object.keys(d) as (keyof IngestCounters)[]) d[k] = after[k] - before[k];
  return d;
}

export class KvIngest {
  readonly hub: KvEventHub;

  constructor(index: KvIndex, private readonly fleet: Fleet, private readonly metrics: GatewayMetrics, private readonly log: (m: string) => void) {
    this.hub = new KvEventHub(index);
  }

  ingest(input: IngestInput): IngestResult {
    const w = this.fleet.get(input.worker);
    if (!w) {
      this.metrics.kvBatches.inc({ result: "unknown_worker" });
      throw new KvgateError("KVGATE_ERR_UNKNOWN_WORKER", `unknown worker ${input.worker}`, { worker: input.worker });
    }
    const rank = input.dpRank ?? w.dpStart;
    if (rank < w.dpStart || rank >= w.dpStart + w.dpSize) {
      this.metrics.kvBatches.inc({ result: "bad_rank" });
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${w.id} has no dp rank ${rank}`, { worker: w.id });
    }
    if (!w.kvEvents) {
      // Routed on kvgate's own decisions: its events would describe tokens kvgate does not hash (README, modes).
      this.metrics.kvBatches.inc({ result: "ignored" });
      return { result: "ignored", events: 0, gap: 0, restarted: false, skipped: 0, cold: false };
    }
    const s = this.#stream(w.id, rank, w.blockSize);
    const before = { ...s.counters };
    s.onBatch(input.seq ?? s.lastSeq + 1, input.bytes);
    const d = delta(s.counters, before);
    if (d.corruptFrames > 0) {
      this.metrics.kvBatches.inc({ result: "corrupt" });
      throw new KvgateError("KVGATE_ERR_CORRUPT_EVENT", "the body is not a KV-event batch kvgate can decode");
    }
    if (d.applyErrors > 0) {
      this.metrics.kvBatches.inc({ result: "apply_error" });
      throw new KvgateError("KVGATE_ERR_CAPACITY", `the index refused the batch of ${w.id} (see the log)`);
    }
    const result = d.staleBatches > 0 ? "duplicate" : "applied";
    this.metrics.kvBatches.inc({ result: d.restarts > 0 ? "restart" : d.gaps > 0 ? "gap" : result === "duplicate" ? "duplicate" : "ok" });
    return {
      result, events: d.storedEvents + d.removedEvents + d.clearedEvents, gap: d.gaps, restarted: d.restarts > 0,
      skipped: SKIPS.reduce((n, k) => n + d[k], 0), cold: s.cold,
    };
  }

  #stream(worker: string, rank: number, blockSize: number): KvEventStream {
    return this.hub.get(worker, rank) ?? this.hub.open({
      worker, dpRank: rank, blockSize,
      onNotice: (n) => this.log(`KV events of ${n.worker} rank ${n.dpRank}: ${n.kind} (${n.detail})`),
    });
  }

  /** Closes a removed worker's streams (the router already dropped its entries); a re-added worker starts over. */
  forget(worker: string): void {
    this.hub.close(worker, { keepEntries: true });
  }
}
