/**
 * @module One engine publisher's KV-event stream into the index: decode, then order by sequence number. A gap asks
 * the engine's replay socket for the missing batches while live ones are held; a replay that cannot fill the gap
 * clears the worker's entries and marks it cold; a sequence number going back means the engine restarted. Nothing
 * here throws to the caller, and a frame that does not decode changes no state at all.
 */
import { isKvgateError, type KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import { BatchPreparer, type PreparedBatch } from "./batch-preparer.ts";
import { addCounters, emptyCounters, type IngestCounters } from "./ingest-counters.ts";
import { resolvePolicy, type IngestPolicy, type IngestPolicyOptions } from "./ingest-policy.ts";
import { parseLiveMessage, type SeqFrame } from "./zmq-frames.ts";

/** The engine's replay buffer: batches from `fromSeq` on, ending at the END marker; rejects when unavailable. */
export interface ReplaySource {
  replay(fromSeq: number): AsyncIterable<SeqFrame>;
}

export interface KvEventStreamOptions extends IngestPolicyOptions {
  worker: string;
  /** The publisher's data-parallel rank, used for batches that carry none. Default 0. */
  dpRank?: number;
  /** The engine's replay socket; without one, every gap makes the worker cold. */
  replay?: ReplaySource;
  /** When the first batch seen is not seq 0, fetch the engine's buffered history from 0. Default true. */
  replayOnJoin?: boolean;
  /** Live batches held while a replay runs (vLLM buffers 10,000 steps). Beyond it they are dropped and re-fetched. */
  maxHeld?: number;
  /** Replays chained back to back before giving up on a stream that keeps gapping. Default 3. */
  maxReplayRounds?: number;
  /** A cold worker counts as rebuilt once this many blocks were stored after the clear (e.g. its KV capacity). */
  rebuildAfterBlocks?: number;
  /** Told about state changes (cold, rebuilt, restart, replay failures) for logging. */
  onNotice?: (notice: StreamNotice) => void;
}

export interface StreamNotice {
  worker: string;
  dpRank: number;
  kind: "cold" | "rebuilt" | "restart" | "replay-failed" | "apply-error";
  detail: string;
}

export type StreamPhase = "initial" | "live" | "replaying" | "closed";

interface Held {
  seq: number;
  batch: PreparedBatch;
  snap: ReturnType<BatchPreparer["builder"]["snapshot"]>;
}

export class KvEventStream {
  readonly counters: IngestCounters = emptyCounters();
  readonly worker: string;
  readonly dpRank: number;
  readonly policy: IngestPolicy;
  /** Last applied sequence number; -1 before the first. */
  lastSeq = -1;
  /** The index holds only part of what the engine caches (events were lost and could not be replayed). */
  cold = false;
  readonly #index: KvIndex;
  readonly #prep: BatchPreparer;
  readonly #o: KvEventStreamOptions;
  readonly #slots = new Set<number>();
  #held: Held[] = [];
  #replay: Promise<void> | null = null;
  #closed = false;
  #blocksSinceCold = 0;

  constructor(index: KvIndex, options: KvEventStreamOptions) {
    this.#index = index;
    this.#o = options;
    this.worker = options.worker;
    this.dpRank = options.dpRank ?? 0;
    this.policy = resolvePolicy(options);
    this.#prep = new BatchPreparer(index, this.worker, this.dpRank, this.policy);
  }

  get phase(): StreamPhase {
    if (this.#closed) return "closed";
    if (this.#replay) return "replaying";
    return this.lastSeq < 0 ? "initial" : "live";
  }

  /** A message from the live socket, as frames. Never throws. */
  onMessage(frames: readonly Uint8Array[]): void {
    this.counters.messages++;
    const m = parseLiveMessage(frames);
    if (!m) {
      this.counters.corruptFrames++;
      return;
    }
    this.onBatch(m.seq, m.payload);
  }

  /** One engine batch with its sequence number (for transports that frame differently). Never throws. */
  onBatch(seq: number, payload: Uint8Array): void {
    if (this.#closed) return;
    try {
      const batch = this.#prepare(payload);
      if (!batch) return;
      if (this.#replay) this.#hold(seq, batch);
      else this.#sequence(seq, batch);
    } catch (e) {
      this.#applyError(e);
    }
  }

  /** Resolves once no replay is running (chained rounds included). */
  async settled(): Promise<void> {
    while (this.#replay) await this.#replay;
  }

  /** Stops the stream; held batches are dropped. The index entries stay (see KvEventHub.detach). */
  close(): void {
    this.#closed = true;
    this.#held = [];
  }

  /** Slots (one per dp rank seen) this stream has written. */
  slots(): number[] {
    return [...this.#slots];
  }

  #prepare(payload: Uint8Array): PreparedBatch | null {
    try {
      return this.#prep.prepare(payload);
    } catch (e) {
      if (isKvgateError(e) && e.code === "KVGATE_ERR_CORRUPT_EVENT") this.counters.corruptFrames++;
      else this.#applyError(e);
      return null;
    }
  }

  #sequence(seq: number, batch: PreparedBatch): void {
    const last = this.lastSeq;
    if (seq === last + 1) return this.#apply(seq, batch);
    if (last >= 0 && seq === last) { this.counters.staleBatches++; return; }
    let restarted = false;
    if (last >= 0 && seq < last) {
      // A publisher's sequence only goes back when it is a new process: its cache started empty.
      this.counters.restarts++;
      this.#notice("restart", `seq ${seq} after ${last}`);
      this.#clearSlots();
      this.lastSeq = -1;
      restarted = true;
      if (this.cold) this.#warm("engine restarted");
      if (seq === 0) return this.#apply(seq, batch);
    }
    const joining = this.lastSeq < 0;
    if (!joining) this.counters.gaps++;
    const replayWanted = !joining || restarted || (this.#o.replayOnJoin ?? true);
    if (this.#o.replay && replayWanted) {
      this.#hold(seq, batch);
      this.#startReplay(this.lastSeq + 1, 0);
      return;
    }
    if (!joining || restarted) this.counters.replayFailures++;
    this.#markCold(joining && !restarted ? "joined after seq 0 without replay" : `gap before seq ${seq}, no replay socket`);
    this.#apply(seq, batch);
  }

  #apply(seq: number, batch: PreparedBatch): void {
    try {
      if (batch.records > 0) this.#prep.apply();
    } catch (e) {
      this.#applyError(e);
    }
    this.lastSeq = seq;
    this.#slots.add(batch.slot);
    this.counters.batches++;
    addCounters(this.counters, batch.delta);
    if (!this.cold) return;
    this.#blocksSinceCold += batch.delta.blocksStored;
    if (batch.clears) this.#warm("engine cleared its cache");
    else if (this.#o.rebuildAfterBlocks !== undefined && this.#blocksSinceCold >= this.#o.rebuildAfterBlocks) {
      this.#warm(`${this.#blocksSinceCold} blocks stored since the clear`);
    }
  }

  #hold(seq: number, batch: PreparedBatch): void {
    if (this.#held.length >= (this.#o.maxHeld ?? 10_000)) {
      this.counters.overflowed++;
      return;
    }
    this.#held.push({ seq, batch, snap: this.#prep.builder.snapshot() });
  }

  #startReplay(from: number, round: number): void {
    const run = this.#runReplay(from).then((ok) => {
      if (this.#replay === run) this.#replay = null;
      this.#drain(ok, round);
    }).catch((e: unknown) => this.#applyError(e));
    this.#replay = run;
  }

  /** Applies the engine's buffered batches from `from`; true when it filled the gap. Never rejects. */
  async #runReplay(from: number): Promise<boolean> {
    this.counters.replayRequests++;
    let got = 0;
    try {
      for await (const fr of this.#o.replay!.replay(from)) {
        if (this.#closed) return false;
        got++;
        if (fr.seq <= this.lastSeq) { this.counters.staleBatches++; continue; }
        const batch = this.#prepare(fr.payload);
        if (!batch) continue; // a corrupt replayed batch leaves a hole: the next one sees it below
        this.counters.replayedBatches++;
        if (fr.seq > this.lastSeq + 1) {
          this.counters.replayTooOld++;
          this.#markCold(`replay resumed at seq ${fr.seq}, ${this.lastSeq + 1} was asked for`);
        }
        this.#apply(fr.seq, batch);
      }
    } catch (e) {
      this.#replayFailed(from, (e as Error)?.message ?? String(e));
      return false;
    }
    if (got === 0) {
      this.#replayFailed(from, "the engine had nothing from that seq on");
      return false;
    }
    return true;
  }

  #replayFailed(from: number, why: string): void {
    this.counters.replayFailures++;
    this.#notice("replay-failed", `replay from seq ${from}: ${why}`);
    if (!this.#closed) this.#markCold(`replay from seq ${from} failed`);
  }

  /** After a replay: applies held live batches in order; another gap chains one more replay round, up to the limit. */
  #drain(replayOk: boolean, round: number): void {
    if (this.#closed) return;
    const held = this.#held;
    this.#held = [];
    for (let i = 0; i < held.length; i++) {
      const h = held[i]!;
      if (h.seq <= this.lastSeq) { this.counters.staleBatches++; continue; }
      // After a failed replay the worker is already cold: it simply carries on from the held batches.
      if (h.seq > this.lastSeq + 1 && replayOk) {
        this.counters.gaps++;
        if (round + 1 < (this.#o.maxReplayRounds ?? 3)) {
          this.#held = held.slice(i);
          this.#startReplay(this.lastSeq + 1, round + 1);
          return;
        }
        this.counters.replayFailures++;
        this.#markCold(`gap before seq ${h.seq} left after ${round + 1} replay rounds`);
      }
      this.#prep.builder.restore(h.snap);
      this.#apply(h.seq, h.batch);
    }
  }

  #markCold(why: string): void {
    this.counters.coldMarks++;
    this.#clearSlots();
    this.cold = true;
    this.#blocksSinceCold = 0;
    this.#notice("cold", why);
  }

  #warm(why: string): void {
    this.cold = false;
    this.counters.rebuilt++;
    this.#notice("rebuilt", why);
  }

  /** Drops this stream's entries from the index (every rank it wrote), through the same binary path. */
  #clearSlots(): void {
    if (this.#slots.size === 0) return;
    try {
      this.#prep.clearSlots(this.#slots);
    } catch (e) {
      this.#applyError(e);
    }
  }

  #applyError(e: unknown): void {
    this.counters.applyErrors++;
    this.#notice("apply-error", isKvgateError(e) ? `${(e as KvgateError).code}: ${e.message}` : String(e));
  }

  #notice(kind: StreamNotice["kind"], detail: string): void {
    try {
      this.#o.onNotice?.({ worker: this.worker, dpRank: this.dpRank, kind, detail });
    } catch {
      // A logging callback must not break ingestion.
    }
  }
}
