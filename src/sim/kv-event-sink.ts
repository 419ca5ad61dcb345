/**
 * @module Where a simulated engine's KV events go: a sink batches, encodes and numbers them per publisher from 0, as
 * vLLM's ZeroMQ publisher does.
 */
import type { KvCacheEvent, KvEventBatch } from "./kv-events.ts";
import { encodeKvEventBatch, type KvEventEncoding } from "./kv-event-codec.ts";

export interface KvEventSink {
  /** Events of one engine step, in order; `ts` in seconds since the epoch. Must not throw or block. */
  publish(events: readonly KvCacheEvent[], ts: number): void;
  /** Sends what is buffered; resolves true when nothing is left queued. */
  flush(): Promise<boolean>;
  /** Flushes, then stops; later publishes are dropped. */
  close(): Promise<void>;
}

/** One encoded batch as a transport sends it. */
export interface EncodedKvBatch {
  /** Per-publisher batch number: 0, 1, 2, … A gap tells the receiver batches were lost. */
  seq: number;
  /** msgpack of a KVEventBatch. */
  bytes: Uint8Array<ArrayBuffer>;
  workerId: string;
  dpRank: number;
  /** Events inside. */
  events: number;
}

export interface BatchIdentity {
  workerId: string;
  dpRank: number;
  encoding?: KvEventEncoding;
}

/** Numbers and encodes batches for one publisher (one engine, one dp rank). */
export class KvBatchSequencer {
  #next = 0;
  constructor(readonly identity: BatchIdentity) {}

  get nextSeq(): number {
    return this.#next;
  }

  seal(events: KvCacheEvent[], ts: number): EncodedKvBatch {
    const batch: KvEventBatch = { ts, events, data_parallel_rank: this.identity.dpRank };
    const bytes = encodeKvEventBatch(batch, this.identity.encoding ?? "array");
    return { seq: this.#next++, bytes, workerId: this.identity.workerId, dpRank: this.identity.dpRank, events: events.length };
  }
}

/**
 * Encodes every step as its own batch (what vLLM publishes per engine step) and hands it to `onBatch`
 * synchronously: for in-process fleets and tests.
 */
export function callbackSink(identity: BatchIdentity, onBatch: (batch: EncodedKvBatch) => void): KvEventSink {
  const sequencer = new KvBatchSequencer(identity);
  let closed = false;
  return {
    publish(events, ts) {
      if (closed || events.length === 0) return;
      onBatch(sequencer.seal([...events], ts));
    },
    flush: async () => true,
    async close() {
      closed = true;
    },
  };
}
