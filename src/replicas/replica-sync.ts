/**
 * @module Router replicas sharing what they know over NATS (issue 14, first slice): engine KV events through a JetStream
 * stream, bookings and approximate-mode decisions on plain subjects. Runtime-neutral: the connection is a SyncBus.
 */
import type { KvIndex } from "../core/kv-index.ts";
import type { MetricsRegistry } from "../gateway/metrics-registry.ts";
import type { KvIngest } from "../gateway/kv-ingest.ts";
import type { Router } from "../routing/router.ts";
import type { NowFn } from "../routing/clock.ts";
import { RemoteBookings } from "./remote-bookings.ts";
import type { SyncBus, SyncMessage } from "./sync-bus.ts";
import type { ReplicaState } from "./replica-state.ts";
import {
  BOOKINGS_PREFIX, DECISIONS_PREFIX, decodeBooking, decodeHashes, encodeBooking, encodeHashes, EVENTS_PREFIX, HEADER_BOOT, HEADER_RANK, HEADER_REPLICA, HEADER_RESTART, HEADER_SEQ, HEADER_WORKER,
  subjectToken, type BookingChange, type BookingMessage, type BookingTuple,
} from "./sync-messages.ts";

/** Prompts longer than this (in blocks, 8 bytes each) are booked at peers by count only: a bound on message size. */
const MAX_SHARED_BLOCKS = 4096;

export interface ReplicaSyncOptions {
  replicaId: string;
  heartbeatMs: number;
  /** Heartbeats a peer may miss before its bookings are dropped. */
  missedHeartbeats?: number;
  /** Bookings kept per peer, and own bookings listed in a heartbeat. */
  maxBookingsPerPeer?: number;
  /** Random per process (see HEADER_BOOT); default a fresh one. */
  boot?: string;
  /**
   * Booking changes wait this long to go out together in one message (0: each at once). A booking freed before its
   * book went out is never sent: short requests cost the bus nothing. Peers learn of load this much later.
   */
  batchMs?: number;
}

export interface ReplicaSyncDeps {
  bus: SyncBus;
  router: Router;
  index: KvIndex;
  ingest: KvIngest;
  registry: MetricsRegistry;
  now: NowFn;
  log: (line: string) => void;
}

interface OwnBooking {
  worker: string;
  dpRank: number;
  prefillTokens: number;
  blocks: number;
  outputBlocks: number;
}

export class ReplicaSync {
  readonly remote: RemoteBookings;
  readonly #own = new Map<number, OwnBooking>();
  readonly #o: Required<ReplicaSyncOptions>;
  readonly #d: ReplicaSyncDeps;
  readonly #connected;
  readonly #published;
  readonly #applied;
  readonly #remoteGauge;
  readonly #behind;
  readonly #lag;
  #lastBeat = -Infinity;
  /** Booking changes not yet published (batchMs), and the timer that will publish them. */
  #pending: BookingChange[] = [];
  #flushTimer: ReturnType<typeof setTimeout> | undefined;
  #words = new Uint32Array(512);
  /** Last event-stream sequence seen (what a snapshot taken now covers). */
  #streamSeq = 0;
  /** Last engine sequence number shared per (worker, rank): one going back marks the batch as a restart. */
  readonly #lastShared = new Map<string, number>();
  readonly #streamGauge;
  readonly #missed;
  /** Snapshots, shared sessions and registry (replica-state.ts); set before the connection is up. */
  state: ReplicaState | undefined;

  constructor(deps: ReplicaSyncDeps, options: ReplicaSyncOptions) {
    this.#d = deps;
    this.#o = { missedHeartbeats: 3, maxBookingsPerPeer: 10_000, boot: randomBoot(), batchMs: 5, ...options };
    const reg = deps.registry;
    this.#connected = reg.gauge("kvgate_sync_connected", "1 while this replica is connected to NATS (state sharing with other replicas)");
    this.#published = reg.counter("kvgate_sync_published_total", "Messages this replica published to its peers, by kind (kv_batch, book, prefill, free, heartbeat, decision, dropped)");
    this.#applied = reg.counter("kvgate_sync_applied_total", "Peer messages applied here, by kind (kv_batch, kv_restart, kv_duplicate, book, prefill, free, heartbeat, decision, invalid, ignored)");
    this.#remoteGauge = reg.gauge("kvgate_sync_remote_bookings", "Bookings other replicas hold, as this replica counts them in its cost");
    this.#streamGauge = reg.gauge("kvgate_sync_stream_seq", "Last event-stream sequence this replica has read (a snapshot it writes covers up to here)");
    this.#missed = reg.counter("kvgate_sync_stream_missed_total", "Event-stream messages this replica never read: trimmed from the stream (age or count limit) before it got to them");
    this.#behind = reg.gauge("kvgate_sync_events_behind", "KV-event batches the shared stream holds that this replica has not read yet (as of the last one read)");
    this.#lag = reg.gauge("kvgate_sync_lag_seconds", "Age of the last shared KV-event batch this replica read, from the stream's store time (NATS server clock)");
    this.#connected.set(undefined, 0);
    this.#remoteGauge.set(undefined, 0);
    this.remote = new RemoteBookings((w, dp, load) => deps.router.setRemoteLoad(w, dp, load), this.#o.maxBookingsPerPeer, undefined,
      (w, dp, keys, n, add) => deps.router.remotePrompt(w, dp, keys, n, add), (w, dp, keys, n) => deps.router.trackPeerInflight(w, dp, keys, n));
    deps.bus.onStatus((up) => {
      this.#connected.set(undefined, up ? 1 : 0);
      if (up) this.#beat(deps.now());
    });
    deps.ingest.share = (w, dp, seq, payload) => this.#shareBatch(w, dp, seq, payload);
    deps.bus.subscribe(`${BOOKINGS_PREFIX}.*`, (m) => this.#onBooking(m));
    deps.bus.subscribe(`${DECISIONS_PREFIX}.*`, (m) => this.#onDecision(m));
    deps.bus.consumeStream((m) => this.#onBatch(m), { coveredSeq: async () => {
      const seq = (await this.state?.beforeReplay()) ?? 0;
      this.#streamSeq = Math.max(this.#streamSeq, seq);
      return seq;
    } });
  }

  get replicaId(): string {
    return this.#o.replicaId;
  }

  get boot(): string {
    return this.#o.boot;
  }

  // ---- this replica's state, published ---------------------------------------------------------------------

  booked(b: { bookingId: number; worker: string; dpRank: number; prefillTokens: number; blocks: number; outputBlocks?: number; sessionId?: string; keys?: Uint32Array }): void {
    this.state?.booked(b);
    const o = b.outputBlocks ?? 0;
    if (this.#own.size < this.#o.maxBookingsPerPeer) {
      this.#own.set(b.bookingId, { worker: b.worker, dpRank: b.dpRank, prefillTokens: b.prefillTokens, blocks: b.blocks, outputBlocks: o });
    }
    // The hashes let peers count shared prefixes once (remote-bookings.ts); a huge prompt goes as a plain count.
    const h = b.keys && b.blocks > 0 && b.blocks <= MAX_SHARED_BLOCKS ? encodeHashes(b.keys, b.blocks) : undefined;
    this.#queue({ k: "book", r: this.#o.replicaId, id: b.bookingId, w: b.worker, dp: b.dpRank, p: b.prefillTokens, b: b.blocks, ...(o > 0 ? { o } : {}), ...(h ? { h } : {}) });
  }

  prefillDone(b: { bookingId: number }): void {
    const own = this.#own.get(b.bookingId);
    if (own) own.prefillTokens = 0;
    this.#queue({ k: "prefill", r: this.#o.replicaId, id: b.bookingId });
  }

  freed(b: { bookingId: number }): void {
    this.#own.delete(b.bookingId);
    this.#queue({ k: "free", r: this.#o.replicaId, id: b.bookingId });
  }

  /** Approximate mode recorded the prompt just hashed on (worker, rank): peers record the same sequence hashes. */
  recorded(r: { worker: string; dpRank: number }): void {
    const need = 2 * this.#d.index.lastBlocks;
    if (need === 0) return;
    if (this.#words.length < need) this.#words = new Uint32Array(need);
    const n = this.#d.index.lastSequenceWordsInto(this.#words);
    const bytes = new Uint8Array(this.#words.buffer, 0, 8 * n).slice();
    this.#publish("decision", `${DECISIONS_PREFIX}.${this.#o.replicaId}`, bytes, { [HEADER_WORKER]: r.worker, [HEADER_RANK]: String(r.dpRank) });
  }

  /** Housekeeping from the gateway's tick: a heartbeat when due, and peers that missed too many lose their bookings. */
  tick(now = this.#d.now()): void {
    if (now - this.#lastBeat >= this.#o.heartbeatMs) this.#beat(now);
    for (const peer of this.remote.expire(now, this.#o.heartbeatMs * this.#o.missedHeartbeats)) {
      this.#d.log(`replica ${peer} missed ${this.#o.missedHeartbeats} heartbeats: its bookings no longer count`);
    }
    this.#remoteGauge.set(undefined, this.remote.size);
    this.state?.tick(now, this.#streamSeq);
  }

  close(): Promise<void> {
    this.#flush();
    this.#d.ingest.share = undefined;
    return this.#d.bus.close();
  }

  #queue(m: BookingChange): void {
    if (this.#o.batchMs <= 0) return this.#sendBooking(m);
    if (m.k === "free" && this.#pending.some((p) => p.k === "book" && p.id === m.id)) {
      // Booked and freed within one batch: the peers need never hear of it.
      this.#pending = this.#pending.filter((p) => p.id !== m.id);
      this.#published.inc({ kind: "coalesced" });
      return;
    }
    this.#pending.push(m);
    this.#flushTimer ??= setTimeout(() => this.#flush(), this.#o.batchMs);
  }

  #flush(): void {
    if (this.#flushTimer !== undefined) clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    const list = this.#pending;
    if (list.length === 0) return;
    this.#pending = [];
    if (list.length === 1) return this.#sendBooking(list[0]!);
    this.#publish("many", `${BOOKINGS_PREFIX}.${this.#o.replicaId}`, encodeBooking({ k: "many", r: this.#o.replicaId, list }));
  }

  #beat(now: number): void {
    // What the heartbeat lists must not overtake the changes still waiting, or a peer would undo them.
    this.#flush();
    this.#lastBeat = now;
    const list: BookingTuple[] = [], o: number[] = [];
    for (const [id, b] of this.#own) {
      list.push([id, b.worker, b.dpRank, b.prefillTokens, b.blocks]);
      o.push(b.outputBlocks);
    }
    this.#sendBooking({ k: "hb", r: this.#o.replicaId, list, ...(o.some((x) => x > 0) ? { o } : {}) }, "heartbeat");
  }

  #sendBooking(m: BookingMessage, kind: string = m.k): void {
    this.#publish(kind, `${BOOKINGS_PREFIX}.${this.#o.replicaId}`, encodeBooking(m));
  }

  #shareBatch(worker: string, dpRank: number, seq: number, payload: Uint8Array): void {
    const key = `${dpRank}\u0000${worker}`;
    const prev = this.#lastShared.get(key);
    this.#lastShared.set(key, seq);
    const headers: Record<string, string> = {
      [HEADER_REPLICA]: this.#o.replicaId, [HEADER_BOOT]: this.#o.boot, [HEADER_WORKER]: worker, [HEADER_RANK]: String(dpRank), [HEADER_SEQ]: String(seq),
    };
    if (prev !== undefined && seq < prev) headers[HEADER_RESTART] = "1";
    this.#publish("kv_batch", `${EVENTS_PREFIX}.${subjectToken(worker)}.${dpRank}`, Uint8Array.prototype.slice.call(payload), headers);
  }

  #publish(kind: string, subject: string, data: Uint8Array, headers?: Record<string, string>): void {
    try {
      const sent = this.#d.bus.publish(subject, data, headers);
      this.#published.inc({ kind: sent ? kind : "dropped" });
    } catch (e) {
      this.#published.inc({ kind: "dropped" });
      this.#d.log(`replica sync: publishing on ${subject}: ${(e as Error).message}`);
    }
  }

  // ---- peers' state, applied ------------------------------------------------------------------------------

  #onBatch(m: SyncMessage): void {
    if (m.seq !== undefined) {
      if (m.seq > this.#streamSeq + 1) this.#missed.inc(undefined, m.seq - this.#streamSeq - 1);
      this.#streamSeq = Math.max(this.#streamSeq, m.seq);
      this.#streamGauge.set(undefined, this.#streamSeq);
    }
    if (m.streamPending !== undefined) this.#behind.set(undefined, m.streamPending);
    if (m.storedAtMs !== undefined) this.#lag.set(undefined, Math.max(0, Date.now() - m.storedAtMs) / 1000);
    // Only this process's own echoes are skipped: what it published before a restart is read back (a warm restart).
    if (m.header(HEADER_REPLICA) === this.#o.replicaId && m.header(HEADER_BOOT) === this.#o.boot) return;
    const worker = m.header(HEADER_WORKER);
    const rank = Number(m.header(HEADER_RANK));
    const seq = Number(m.header(HEADER_SEQ));
    if (!worker || !Number.isInteger(rank) || rank < 0 || !Number.isInteger(seq) || seq < 0) {
      this.#applied.inc({ kind: "invalid" });
      return;
    }
    try {
      const restart = m.header(HEADER_RESTART) === "1";
      const r = this.#d.ingest.ingestFromPeer(worker, rank, seq, m.data, restart);
      this.#applied.inc({ kind: r === "applied" ? (restart ? "kv_restart" : "kv_batch") : r === "duplicate" ? "kv_duplicate" : "ignored" });
    } catch (e) {
      this.#applied.inc({ kind: "invalid" });
      this.#d.log(`replica sync: a peer's KV batch of ${worker}: ${(e as Error).message}`);
    }
  }

  #onBooking(m: SyncMessage): void {
    let msg: BookingMessage;
    try {
      msg = decodeBooking(m.data);
    } catch {
      this.#applied.inc({ kind: "invalid" });
      return;
    }
    if (msg.r === this.#o.replicaId || m.subject !== `${BOOKINGS_PREFIX}.${msg.r}`) return;
    const now = this.#d.now();
    if (msg.k === "many") for (const one of msg.list) this.#applyBooking(one, now);
    else this.#applyBooking(msg, now);
    this.#remoteGauge.set(undefined, this.remote.size);
  }

  #applyBooking(msg: Exclude<BookingMessage, { k: "many" }>, now: number): void {
    const rb = this.remote;
    let keys: Uint32Array | undefined;
    try {
      keys = msg.k === "book" && msg.h !== undefined ? decodeHashes(msg.h, msg.b) : undefined;
    } catch {
      this.#applied.inc({ kind: "invalid" });
      return;
    }
    const done = msg.k === "book" ? rb.book(msg.r, msg.id, { worker: msg.w, dpRank: msg.dp, prefillTokens: msg.p, blocks: msg.b, outputBlocks: msg.o ?? 0, keys }, now)
      : msg.k === "prefill" ? (rb.heard(msg.r, now), rb.prefillDone(msg.r, msg.id))
      : msg.k === "free" ? (rb.heard(msg.r, now), rb.free(msg.r, msg.id))
      : (rb.replace(msg.r, msg.list, now, msg.o), true);
    this.#applied.inc({ kind: !done ? "ignored" : msg.k === "hb" ? "heartbeat" : msg.k });
  }

  #onDecision(m: SyncMessage): void {
    const peer = m.subject.slice(DECISIONS_PREFIX.length + 1);
    if (peer === this.#o.replicaId) return;
    const worker = m.header(HEADER_WORKER);
    const rank = Number(m.header(HEADER_RANK));
    if (!worker || m.data.length % 8 !== 0) {
      this.#applied.inc({ kind: "ignored" });
      return;
    }
    try {
      // A copy of its own: the client's data may be a view into a larger (Node Buffer) pool.
      const words = new Uint32Array(m.data.length >>> 2);
      new Uint8Array(words.buffer).set(m.data);
      // Recorded by the router as its own decisions are (the rank's learnt lifetime, counted in its turnover); a rank
      // unknown here, or one whose KV events this router trusts, ignores it.
      this.#applied.inc({ kind: this.#d.router.recordPeerRoute(worker, rank, words) ? "decision" : "ignored" });
    } catch (e) {
      this.#applied.inc({ kind: "invalid" });
      this.#d.log(`replica sync: recording a decision of ${peer} on ${worker}: ${(e as Error).message}`);
    }
  }
}

function randomBoot(): string {
  const r = new Uint32Array(2);
  crypto.getRandomValues(r);
  return `${r[0]!.toString(36)}${r[1]!.toString(36)}`;
}
