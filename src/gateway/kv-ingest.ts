/**
 * @module KV-event ingest: every transport (HTTP push, kvgate bridge, ZeroMQ) feeds the same per-(worker, rank) streams, so
 * one policy and one sequence logic hold for all (docs/kv-events.md#transports-into-the-streams).
 */
import { KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import { emptyCounters, KvEventHub, type IngestCounters, type KvEventStream, type KvEventStreamOptions, type StreamNotice } from "../events/index.ts";
import type { Fleet, FleetWorker } from "./fleet.ts";
import type { GatewayMetrics } from "./gateway-metrics.ts";
import type { KvFrame } from "../events/kv-frames.ts";
import type { KvEventTransport, KvEventTransportFactory, ZmqConnectionCounters } from "../events/kv-event-transport.ts";

export interface IngestInput {
  worker: string;
  /** The publisher's rank (header); a batch's own data_parallel_rank wins inside the stream. */
  dpRank?: number;
  /** Without one, the batch is taken as the next in order. */
  seq?: number;
  bytes: Uint8Array;
}

export interface FramesInput {
  worker: string;
  dpRank?: number;
  frames: readonly KvFrame[];
  /** The bridge's session id and the number of this POST in it; a repeat (a retry after a lost answer) is not applied again. */
  source?: { session: string; post: number };
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

export interface FramesResult extends IngestResult {
  frames: number;
  /** Frames that did not decode (counted, nothing changed for them). */
  corrupt: number;
  /** The stream's last applied sequence number (-1 before any): where a (re)connecting bridge resumes. */
  last_seq: number;
}

export interface KvIngestOptions {
  /** Told when a worker's view turns cold or trustworthy again. */
  onCold?: (worker: string, cold: boolean) => void;
  /** Told of every batch a (worker, rank) stream receives, from the engine or a peer replica: its events flow. */
  onEvents?: (worker: string, dpRank: number) => void;
  /** The runtime's ZeroMQ transport; absent on runtimes without one. */
  transport?: KvEventTransportFactory;
  /** The runtime's name, for the error when a worker needs ZeroMQ and there is none. */
  runtime?: string;
}

const SKIPS: readonly (keyof IngestCounters)[] = ["droppedBlockSize", "droppedTokenCount", "droppedTier", "droppedGroup", "droppedExtraKeys", "droppedLora", "unknownEvents"];
/** Blocks a cold worker must store before its view is trusted again, when its KV capacity is not configured. */
export const DEFAULT_REBUILD_BLOCKS = 4096;

function delta(after: IngestCounters, before: IngestCounters): IngestCounters {
  const d = emptyCounters();
  for (const k of Object.keys(d) as (keyof IngestCounters)[]) d[k] = after[k] - before[k];
  return d;
}

export class KvIngest {
  readonly hub: KvEventHub;
  /** Last POST applied per stream and bridge session. */
  readonly #posts = new Map<string, { session: string; post: number }>();
  #transport: Promise<KvEventTransport> | undefined;
  #started: KvEventTransport | undefined;
  readonly #zmqWorkers = new Set<string>();
  /** Workers already warned that their events are EAGLE but their configuration is not. */
  readonly #eagleWarned = new Set<string>();
  /** Told of every batch an engine stream receives from this replica's own transports (not from peers): replica sharing. */
  share: ((worker: string, dpRank: number, seq: number, payload: Uint8Array) => void) | undefined;
  #fromPeer = false;

  constructor(index: KvIndex, private readonly fleet: Fleet, private readonly metrics: GatewayMetrics, private readonly log: (m: string) => void,
    private readonly opts: KvIngestOptions = {}) {
    this.hub = new KvEventHub(index);
  }

  /** One msgpack KVEventBatch (HTTP push). Corrupt bodies and index refusals throw typed errors. */
  ingest(input: IngestInput): IngestResult {
    const w = this.#worker(input.worker, input.dpRank);
    if (!w.kvEvents) return this.#ignored();
    const s = this.#stream(w, input.dpRank ?? w.dpStart);
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
    return this.#result(result, d, s);
  }

  /**
   * Raw engine messages forwarded by a bridge, applied in order. A frame that does not decode is counted and skipped
   * (the others still apply: failing the whole POST would make the bridge resend what was already applied).
   */
  ingestFrames(input: FramesInput): FramesResult {
    const w = this.#worker(input.worker, input.dpRank);
    const rank = input.dpRank ?? w.dpStart;
    if (!w.kvEvents) return { ...this.#ignored(), frames: input.frames.length, corrupt: 0, last_seq: -1 };
    const s = this.#stream(w, rank);
    const key = `${rank}\u0000${w.id}`;
    const src = input.source;
    const last = this.#posts.get(key);
    if (src && last && last.session === src.session && src.post <= last.post) {
      this.metrics.kvBatches.inc({ result: "duplicate_post" }, input.frames.length);
      return { ...this.#result("duplicate", emptyCounters(), s), frames: input.frames.length, corrupt: 0, last_seq: s.lastSeq };
    }
    const before = { ...s.counters };
    for (const f of input.frames) s.onMessage([f.topic, f.seq, f.payload]);
    if (src) this.#posts.set(key, { session: src.session, post: src.post });
    const d = delta(s.counters, before);
    const ok = Math.max(0, d.batches - d.restarts - d.gaps);
    if (ok > 0) this.metrics.kvBatches.inc({ result: "ok" }, ok);
    for (const [k, label] of [["gaps", "gap"], ["restarts", "restart"], ["staleBatches", "duplicate"], ["corruptFrames", "corrupt"], ["applyErrors", "apply_error"]] as const) {
      if (d[k] > 0) this.metrics.kvBatches.inc({ result: label }, d[k]);
    }
    const result = d.batches === 0 && d.staleBatches > 0 ? "duplicate" : "applied";
    return { ...this.#result(result, d, s), frames: input.frames.length, corrupt: d.corruptFrames, last_seq: s.lastSeq };
  }

  /**
   * A batch another router replica received from an engine, fed to the same (worker, rank) stream. One at or below the
   * stream's last sequence number is a duplicate (this replica saw it itself, or it is a late echo) and is not applied.
   */
  ingestFromPeer(worker: string, dpRank: number, seq: number, bytes: Uint8Array, restarted = false): "applied" | "duplicate" | "ignored" {
    const w = this.fleet.get(worker);
    if (!w || !w.kvEvents || dpRank < w.dpStart || dpRank >= w.dpStart + w.dpSize) return "ignored";
    const s = this.#zmqWorkers.has(w.id) ? this.hub.get(w.id, dpRank) : this.#stream(w, dpRank);
    if (!s) return "ignored";
    // A peer that saw the engine's sequence go back says so: the stream then judges the batch itself (a restart it has
    // not seen clears the worker's view; one it has seen leaves the batch a duplicate).
    if (seq <= s.lastSeq && !restarted) return "duplicate";
    const before = s.counters.batches + s.counters.restarts;
    this.#fromPeer = true;
    try {
      s.onBatch(seq, bytes);
    } finally {
      this.#fromPeer = false;
    }
    return restarted && s.counters.batches + s.counters.restarts === before ? "duplicate" : "applied";
  }

  /** Blocks the (worker, rank)'s KV events have removed so far (0 before any stream), cumulative. */
  blocksRemovedOf(worker: string, dpRank: number): number {
    return this.hub.get(worker, dpRank)?.counters.blocksRemoved ?? 0;
  }

  /** Each HTTP-fed (worker, rank) stream's last applied sequence number, for a warm-restart snapshot. */
  streamSeqs(): [string, number, number][] {
    return this.hub.streams().filter((s) => s.lastSeq >= 0 && !this.#zmqWorkers.has(s.worker)).map((s) => [s.worker, s.dpRank, s.lastSeq]);
  }

  /** A snapshot's sequence numbers, for streams of known workers that have not started yet; returns how many resumed. */
  resumeStreams(list: readonly [string, number, number][]): number {
    let n = 0;
    for (const [worker, rank, seq] of list) {
      const w = this.fleet.get(worker);
      if (!w || !w.kvEvents || this.#zmqWorkers.has(w.id) || rank < w.dpStart || rank >= w.dpStart + w.dpSize) continue;
      if (this.#stream(w, rank).resumeAt(seq)) n++;
    }
    return n;
  }

  /** Starts receiving a worker's events over ZeroMQ when it has a zmq endpoint; a clear error where the runtime has no ZeroMQ. */
  async attach(w: FleetWorker): Promise<void> {
    if (!w.zmq) return;
    if (!this.opts.transport) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT",
        `worker ${w.id} has zmq_endpoint ${w.zmq.endpoint}, but ${this.opts.runtime ?? "this runtime"} cannot open ZeroMQ sockets; ` +
        `run \`kvgate bridge --zmq ${w.zmq.endpoint} --to <this gateway>/admin/kv-events --worker ${w.id}\` next to the engine and drop zmq_endpoint`);
    }
    const transport = await (this.#transport ??= this.opts.transport(this.hub, this.log));
    this.#started = transport;
    const ranks = Array.from({ length: w.dpSize }, (_, i) => w.dpStart + i);
    await transport.attach({
      endpoint: w.zmq.endpoint, replayEndpoint: w.zmq.replayEndpoint, topic: w.zmq.topic, dpRanks: ranks,
      ...this.#streamOptions(w),
    });
    this.#zmqWorkers.add(w.id);
  }

  /** Closes a removed worker's streams and sockets (the router already dropped its entries); a re-added worker starts over. */
  forget(worker: string): void {
    this.#eagleWarned.delete(worker);
    for (const k of this.#posts.keys()) if (k.endsWith(`\u0000${worker}`)) this.#posts.delete(k);
    if (this.#zmqWorkers.delete(worker) && this.#transport) {
      void this.#transport.then((t) => t.detach(worker, { keepEntries: true })).catch((e: unknown) => this.log(`closing the ZeroMQ sockets of ${worker}: ${String(e)}`));
      return;
    }
    this.hub.close(worker, { keepEntries: true });
  }

  /** The ZeroMQ transport's connection counters; undefined until a worker with a zmq_endpoint is attached. */
  zmqCounters(): Readonly<ZmqConnectionCounters> | undefined {
    return this.#started?.transport;
  }

  /** Closes every ZeroMQ socket (shutdown). */
  async close(): Promise<void> {
    if (this.#transport) await (await this.#transport).close();
  }

  #worker(id: string, dpRank: number | undefined): FleetWorker {
    const w = this.fleet.get(id);
    if (!w) {
      this.metrics.kvBatches.inc({ result: "unknown_worker" });
      throw new KvgateError("KVGATE_ERR_UNKNOWN_WORKER", `unknown worker ${id}`, { worker: id });
    }
    const rank = dpRank ?? w.dpStart;
    if (rank < w.dpStart || rank >= w.dpStart + w.dpSize) {
      this.metrics.kvBatches.inc({ result: "bad_rank" });
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${w.id} has no dp rank ${rank}`, { worker: w.id });
    }
    return w;
  }

  #ignored(): IngestResult {
    // Routed on kvgate's own decisions: its events would describe tokens kvgate does not hash (README, modes).
    this.metrics.kvBatches.inc({ result: "ignored" });
    return { result: "ignored", events: 0, gap: 0, restarted: false, skipped: 0, cold: false };
  }

  #result(result: IngestResult["result"], d: IngestCounters, s: KvEventStream): IngestResult {
    return {
      result, events: d.storedEvents + d.removedEvents + d.clearedEvents, gap: d.gaps, restarted: d.restarts > 0,
      skipped: SKIPS.reduce((n, k) => n + d[k], 0), cold: s.cold,
    };
  }

  #streamOptions(w: FleetWorker): Omit<KvEventStreamOptions, "dpRank" | "replay"> {
    return {
      worker: w.id, blockSize: w.blockSize, rebuildAfterBlocks: w.totalKvBlocks ?? DEFAULT_REBUILD_BLOCKS,
      onNotice: (n) => this.#notice(n),
      onReceived: (s, seq, payload) => {
        this.opts.onEvents?.(s.worker, s.dpRank);
        if (s.eagleEvents > 0 && !w.entry.eagle && !this.#eagleWarned.has(w.id)) {
          this.#eagleWarned.add(w.id);
          this.log(`KV events of ${w.id} carry EAGLE token pairs, but the worker is not configured eagle=true: its prompts are hashed ` +
            `without EAGLE windows and will never match what it caches; add eagle=true to the worker (and to every worker of its models)`);
        }
        if (!this.#fromPeer) this.share?.(s.worker, s.dpRank, seq, payload);
      },
    };
  }

  #notice(n: StreamNotice): void {
    this.log(`KV events of ${n.worker} rank ${n.dpRank}: ${n.kind} (${n.detail})`);
    if (n.kind === "cold" || n.kind === "rebuilt") this.opts.onCold?.(n.worker, this.hub.isCold(n.worker));
  }

  #stream(w: FleetWorker, rank: number): KvEventStream {
    if (this.#zmqWorkers.has(w.id)) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${w.id} receives its KV events over ZeroMQ; HTTP batches would interleave with them`, { worker: w.id });
    }
    return this.hub.get(w.id, rank) ?? this.hub.open({ ...this.#streamOptions(w), dpRank: rank });
  }
}
