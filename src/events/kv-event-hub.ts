/**
 * @module The engine KV-event streams feeding one index, keyed by (worker, dp rank), with totals that outlive closed
 * streams so the Prometheus counters on /metrics never go down.
 */
import { KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import { addCounters, emptyCounters, type IngestCounters } from "./ingest-counters.ts";
import { KvEventStream, type KvEventStreamOptions, type StreamPhase } from "./kv-event-stream.ts";
import type { TierWeights } from "./ingest-policy.ts";

export interface IngestTotals extends IngestCounters {
  /** Open streams. */
  streams: number;
  /** Open streams whose worker is cold (index view incomplete). */
  coldStreams: number;
  /** Open streams with a replay in flight. */
  replaying: number;
}

export interface StreamStatus {
  worker: string;
  dpRank: number;
  phase: StreamPhase;
  cold: boolean;
  lastSeq: number;
  blockSize: number;
  tierWeights: Readonly<TierWeights>;
  counters: Readonly<IngestCounters>;
}

const key = (worker: string, rank: number): string => `${rank}\u0000${worker}`;

export class KvEventHub {
  readonly #streams = new Map<string, KvEventStream>();
  readonly #retired = emptyCounters();

  constructor(readonly index: KvIndex, readonly defaults: Partial<KvEventStreamOptions> = {}) {}

  /** Opens the stream of one (worker, rank) publisher. */
  open(options: KvEventStreamOptions): KvEventStream {
    const o = { ...this.defaults, ...options } as KvEventStreamOptions;
    const k = key(o.worker, o.dpRank ?? 0);
    if (this.#streams.has(k)) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `a KV-event stream for ${o.worker} rank ${o.dpRank ?? 0} is already open`);
    }
    const s = new KvEventStream(this.index, o);
    this.#streams.set(k, s);
    return s;
  }

  get(worker: string, dpRank = 0): KvEventStream | undefined {
    return this.#streams.get(key(worker, dpRank));
  }

  streams(): KvEventStream[] {
    return [...this.#streams.values()];
  }

  /**
   * Closes every stream of `worker`. By default its entries leave the index too (nothing would keep them current);
   * `keepEntries` leaves them, e.g. while a transport reconnects under a new stream.
   */
  close(worker: string, opts: { keepEntries?: boolean } = {}): void {
    for (const [k, s] of this.#streams) {
      if (s.worker !== worker) continue;
      s.close();
      addCounters(this.#retired, s.counters);
      this.#streams.delete(k);
    }
    if (!opts.keepEntries) this.index.removeWorker(worker);
  }

  closeAll(opts: { keepEntries?: boolean } = {}): void {
    for (const w of new Set(this.streams().map((s) => s.worker))) this.close(w, opts);
  }

  /** Totals over every stream ever opened, plus gauges over the open ones. */
  counters(): IngestTotals {
    const t = addCounters(emptyCounters(), this.#retired) as IngestTotals;
    t.streams = 0;
    t.coldStreams = 0;
    t.replaying = 0;
    for (const s of this.#streams.values()) {
      addCounters(t, s.counters);
      t.streams++;
      if (s.cold) t.coldStreams++;
      if (s.phase === "replaying") t.replaying++;
    }
    return t;
  }

  status(): StreamStatus[] {
    return this.streams().map((s) => ({
      worker: s.worker, dpRank: s.dpRank, phase: s.phase, cold: s.cold, lastSeq: s.lastSeq,
      blockSize: s.policy.blockSize, tierWeights: s.policy.tierWeights, counters: { ...s.counters },
    }));
  }

  /** Whether any open stream of `worker` is cold (the router should not trust its overlap alone). */
  isCold(worker: string): boolean {
    return this.streams().some((s) => s.worker === worker && s.cold);
  }
}
