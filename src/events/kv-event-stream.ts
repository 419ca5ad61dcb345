/**
 * @module One engine publisher's KV-event stream into the index: decode, order by sequence number, and recover from gaps and
 * restarts (docs/kv-events.md#ordering-and-recovery); nothing here throws to the caller.
 */
import { isKvgateError, type KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import { BatchPreparer, type DecoderStats, type PreparedBatch, type RecordSnapshot } from "./batch-preparer.ts";
import { addDelta, emptyCounters, type IngestCounters } from "./ingest-counters.ts";
import { resolvePolicy, type IngestPolicy } from "./ingest-policy.ts";
import type { KvEventStreamOptions, StreamNotice } from "./stream-options.ts";
import { liveSeq, plainFrame } from "./zmq-frames.ts";

export type { KvEventStreamOptions, ReplaySource, StreamNotice } from "./stream-options.ts";

export type StreamPhase = "initial" | "live" | "replaying" | "closed";

interface Held {
  seq: number;
  batch: PreparedBatch;
  snap: RecordSnapshot;
  /** The live sequence went back here: the engine restarted while a replay ran. */
  restart: boolean;
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
  /** Last sequence number seen on the live socket (applied or not); restarts show as this going back. */
  #lastLive = -1;

  constructor(index: KvIndex, options: KvEventStreamOptions) {
    this.#index = index;
    this.#o = options;
    this.worker = options.worker;
    this.dpRank = options.dpRank ?? 0;
    this.policy = resolvePolicy(options);
    this.#prep = new BatchPreparer(index, this.worker, this.dpRank, this.policy, { coreDecode: options.coreDecode });
  }

  /** Batches decoded in the core and by the TypeScript decoder (the core declines LoRA, EAGLE and rare shapes). */
  get decoders(): Readonly<DecoderStats> {
    return this.#prep.stats;
  }

  /** Stored events that came with EAGLE token bigrams: the engine runs EAGLE (its worker should say eagle=true). */
  get eagleEvents(): number {
    return this.#prep.eagleEvents;
  }

  get phase(): StreamPhase {
    if (this.#closed) return "closed";
    if (this.#replay) return "replaying";
    return this.lastSeq < 0 ? "initial" : "live";
  }

  /**
   * A message from the live socket, as frames the transport hands out (Node Buffers too: the payload is viewed as a
   * plain Uint8Array, so the decoders see one array class). Never throws; keeps no frame after it returns.
   */
  onMessage(frames: readonly Uint8Array[]): void {
    this.counters.messages++;
    const seq = liveSeq(frames);
    if (seq < 0) {
      this.counters.corruptFrames++;
      return;
    }
    this.onBatch(seq, plainFrame(frames[2]!));
  }

  /** One engine batch with its sequence number (for transports that frame differently). Never throws. */
  onBatch(seq: number, payload: Uint8Array): void {
    if (this.#closed) return;
    try {
      this.#o.onReceived?.(this, seq, payload);
      // The steady state (next in order, nothing replaying, no restart): decoded and applied in one step.
      if (!this.#replay && seq === this.lastSeq + 1 && seq > this.#lastLive) return this.#applyNext(seq, payload);
      const batch = this.#prepare(payload);
      if (!batch) return;
      if (this.#replay) this.#hold(seq, batch);
      else this.#sequence(seq, batch);
    } catch (e) {
      this.#applyError(e);
    }
  }

  /**
   * Picks up where a snapshot of this stream left off (a warm restart): `seq` counts as applied and as the last live one,
   * so later batches continue it and a lower sequence number from the engine shows as its restart. Only before the first batch.
   */
  resumeAt(seq: number): boolean {
    if (this.#closed || this.lastSeq >= 0 || this.#lastLive >= 0 || this.#replay || !Number.isInteger(seq) || seq < 0) return false;
    this.lastSeq = seq;
    this.#lastLive = seq;
    return true;
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
    const prevLive = this.#lastLive;
    this.#lastLive = seq;
    let restarted = false;
    if (prevLive >= 0 && seq < prevLive) {
      // The live sequence only goes back when the publisher is a new process, whose cache started empty.
      this.#restart(seq, prevLive);
      restarted = true;
    } else if (seq <= this.lastSeq) {
      // A duplicate, or a batch a replay already applied (the replay socket can run ahead of the live one).
      this.counters.staleBatches++;
      return;
    }
    if (seq === this.lastSeq + 1) return this.#apply(seq, batch);
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

  #restart(seq: number, prev: number): void {
    this.counters.restarts++;
    this.#notice("restart", `seq ${seq} after ${prev}`);
    this.#clearSlots();
    this.lastSeq = -1;
    if (this.cold) this.#warm("engine restarted");
  }

  /** `#sequence` + `#apply` for the batch right after the last applied one, with the records applied as decoded. */
  #applyNext(seq: number, payload: Uint8Array): void {
    let batch: PreparedBatch;
    try {
      batch = this.#prep.prepareApply(payload);
    } catch (e) {
      if (isKvgateError(e) && e.code === "KVGATE_ERR_CORRUPT_EVENT") this.counters.corruptFrames++;
      else this.#applyError(e);
      return;
    }
    this.#lastLive = seq;
    const err = this.#prep.applyError;
    if (err !== undefined) this.#applyError(err);
    this.#applied(seq, batch);
  }

  #apply(seq: number, batch: PreparedBatch): void {
    try {
      if (batch.records > 0) this.#prep.apply();
    } catch (e) {
      this.#applyError(e);
    }
    this.#applied(seq, batch);
  }

  /** Bookkeeping once a batch was applied (or its apply failed: it is not retried). */
  #applied(seq: number, batch: PreparedBatch): void {
    this.lastSeq = seq;
    this.#slots.add(batch.slot);
    this.counters.batches++;
    addDelta(this.counters, batch.delta);
    if (!this.cold) return;
    this.#blocksSinceCold += batch.delta.blocksStored;
    if (batch.clears) this.#warm("engine cleared its cache");
    else if (this.#o.rebuildAfterBlocks !== undefined && this.#blocksSinceCold >= this.#o.rebuildAfterBlocks) {
      this.#warm(`${this.#blocksSinceCold} blocks stored since the clear`);
    }
  }

  #hold(seq: number, batch: PreparedBatch, restart = false): void {
    const prevLive = this.#lastLive;
    this.#lastLive = seq;
    if (this.#held.length >= (this.#o.maxHeld ?? 10_000)) {
      this.counters.overflowed++;
      return;
    }
    this.#held.push({ seq, batch, snap: this.#prep.snapshot(), restart: restart || (prevLive >= 0 && seq < prevLive) });
  }

  #startReplay(from: number, round: number): void {
    const done = (): void => {
      if (this.#replay === run) this.#replay = null;
    };
    const run: Promise<void> = this.#runReplay(from).then(
      (ok) => { done(); this.#drain(ok, round); },
      (e: unknown) => { done(); this.#applyError(e); this.#drain(false, round); },
    ).catch((e: unknown) => this.#applyError(e));
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
      if (h.restart) this.#restart(h.seq, this.lastSeq);
      if (h.seq <= this.lastSeq) { this.counters.staleBatches++; continue; }
      // After a failed replay the worker is already cold: it simply carries on from the held batches.
      if (h.seq > this.lastSeq + 1 && (replayOk || h.restart)) {
        if (this.lastSeq >= 0) this.counters.gaps++;
        if (this.#o.replay && round + 1 < (this.#o.maxReplayRounds ?? 3)) {
          this.#held = held.slice(i);
          this.#held[0] = { ...h, restart: false };
          this.#startReplay(this.lastSeq + 1, round + 1);
          return;
        }
        this.counters.replayFailures++;
        this.#markCold(`gap before seq ${h.seq} left after ${round + 1} replay rounds`);
      }
      this.#prep.restore(h.snap);
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
