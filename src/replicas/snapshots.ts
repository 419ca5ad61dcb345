/**
 * @module Warm restarts: this replica's index, session bindings and engine-stream positions written to a JetStream object
 * store every interval (one object per replica), and at start the newest readable snapshot of the pool loaded, so the
 * event stream is replayed from the sequence after it instead of from its start (which may have been trimmed).
 */
import { dumpIndex, loadIndexDump } from "../core/index-snapshot.ts";
import type { KvIndex } from "../core/kv-index.ts";
import type { MetricsRegistry } from "../gateway/metrics-registry.ts";
import type { KvIngest } from "../gateway/kv-ingest.ts";
import type { NowFn } from "../routing/clock.ts";
import type { Router } from "../routing/router.ts";
import { decodeSnapshot, encodeSnapshot, SNAPSHOT_FORMAT, SnapshotError, type ReplicaSnapshot } from "./snapshot-format.ts";
import type { SyncObjectInfo, SyncObjects } from "./sync-bus.ts";

export interface SnapshotDeps {
  objects: SyncObjects;
  index: KvIndex;
  router: Router;
  ingest: KvIngest;
  registry: MetricsRegistry;
  /** The router's clock (TTLs are written as time left by it). */
  now: NowFn;
  /** Unix ms: snapshot ages, across processes. */
  wallNow?: () => number;
  log: (line: string) => void;
}

export interface SnapshotOptions {
  replicaId: string;
  /** 0: never write one (loading still happens). */
  intervalMs: number;
  /** Snapshots tried at start, newest first, before falling back to replaying the whole stream. */
  maxTries?: number;
  /** Larger snapshots are not downloaded (this index could not hold them): from the index capacity and session limit. */
  maxBytes: number;
}

const PREFIX = "index-";
const META_FORMAT = "kvgate-format";
const META_SEQ = "kvgate-stream-seq";
const META_TAKEN = "kvgate-taken-at";

export class SnapshotKeeper {
  readonly #d: SnapshotDeps;
  readonly #o: Required<SnapshotOptions>;
  readonly #total;
  readonly #age;
  readonly #bytes;
  readonly #restored;
  readonly #wall: () => number;
  #lastAttempt = -Infinity;
  /** Unix ms of the snapshot this replica last wrote or loaded; undefined before either. */
  #lastTakenAt: number | undefined;
  #busy = false;
  /** Set once restore() is done: a snapshot written before would overwrite a good one with an index still empty. */
  #loadDone = false;

  constructor(deps: SnapshotDeps, options: SnapshotOptions) {
    this.#d = deps;
    this.#o = { maxTries: 3, ...options };
    this.#wall = deps.wallNow ?? Date.now;
    const reg = deps.registry;
    this.#total = reg.counter("kvgate_sync_snapshots_total", "Warm-restart snapshots by result: written, write_failed, loaded, refused_format, refused_corrupt, refused_size, load_failed, none");
    this.#age = reg.gauge("kvgate_sync_last_snapshot_age_seconds", "Seconds since the snapshot this replica last wrote (or loaded at start) was taken");
    this.#bytes = reg.gauge("kvgate_sync_last_snapshot_bytes", "Size of the snapshot this replica last wrote or loaded");
    this.#restored = reg.gauge("kvgate_sync_restored_entries", "Index entries this replica loaded from a snapshot at start");
  }

  get objectName(): string {
    return `${PREFIX}${this.#o.replicaId}`;
  }

  /**
   * Loads the newest snapshot of the format this kvgate reads (any replica's: they share one event stream) and returns
   * the stream sequence it covers; 0 when there is none usable, so the stream is replayed from its start.
   */
  async restore(): Promise<number> {
    try {
      return await this.#restore();
    } finally {
      this.#loadDone = true;
      this.#lastAttempt = this.#d.now();
    }
  }

  async #restore(): Promise<number> {
    let infos: SyncObjectInfo[];
    try {
      infos = (await this.#d.objects.list()).filter((i) => i.name.startsWith(PREFIX));
    } catch (e) {
      this.#total.inc({ result: "load_failed" });
      this.#d.log(`snapshots: cannot list them (${(e as Error).message}); replaying the event stream from its start`);
      return 0;
    }
    const usable: SyncObjectInfo[] = [];
    for (const i of infos) {
      if (i.metadata[META_FORMAT] === String(SNAPSHOT_FORMAT) && i.size <= this.#o.maxBytes) usable.push(i);
      else if (i.size > this.#o.maxBytes) {
        this.#total.inc({ result: "refused_size" });
        this.#d.log(`snapshot ${i.name}: ${i.size} bytes, more than this replica's index and sessions could hold (${this.#o.maxBytes}); not loaded`);
      } else {
        this.#total.inc({ result: "refused_format" });
        this.#d.log(`snapshot ${i.name}: format ${i.metadata[META_FORMAT] ?? "unknown"}, this kvgate reads ${SNAPSHOT_FORMAT}; not loaded`);
      }
    }
    usable.sort((a, b) => Number(b.metadata[META_TAKEN] ?? 0) - Number(a.metadata[META_TAKEN] ?? 0));
    for (const info of usable.slice(0, this.#o.maxTries)) {
      const seq = await this.#load(info);
      if (seq !== undefined) return seq;
    }
    if (usable.length === 0) this.#total.inc({ result: "none" });
    this.#d.log("snapshots: none loaded; replaying the event stream from its start");
    return 0;
  }

  async #load(info: SyncObjectInfo): Promise<number | undefined> {
    let snap: ReplicaSnapshot;
    try {
      const bytes = await this.#d.objects.get(info.name);
      if (!bytes) throw new SnapshotError("corrupt", "the object vanished");
      snap = await decodeSnapshot(bytes);
      this.#bytes.set(undefined, bytes.length);
    } catch (e) {
      const reason = e instanceof SnapshotError ? `refused_${e.reason}` : "load_failed";
      this.#total.inc({ result: reason });
      this.#d.log(`snapshot ${info.name}: ${(e as Error).message}; not loaded`);
      return undefined;
    }
    const d = this.#d;
    const known = (worker: string, rank: number) => d.router.workerEntry(worker)?.ranks.some((r) => r.dpRank === rank) ?? false;
    const r = loadIndexDump(d.index, snap.index, d.now(), known);
    let sessions = 0;
    for (const [id, worker, dpRank] of snap.sessions) if (known(worker, dpRank) && d.router.adoptSession(id, { worker, dpRank })) sessions++;
    const streams = d.ingest.resumeStreams(snap.streams);
    this.#restored.set(undefined, r.loaded);
    this.#total.inc({ result: "loaded" });
    this.#lastTakenAt = snap.takenAt;
    this.#refreshAge();
    d.log(`snapshot ${info.name} of ${snap.replica} loaded: ${r.loaded} index entries (${r.skipped} skipped), ${sessions} sessions, ` +
      `${streams} engine streams; replaying the event stream after seq ${snap.streamSeq}`);
    return snap.streamSeq;
  }

  /** From the replica's tick: writes a snapshot when one is due (one at a time). */
  tick(now: number, streamSeq: number): void {
    this.#refreshAge();
    if (this.#o.intervalMs <= 0 || !this.#loadDone || this.#busy || now - this.#lastAttempt < this.#o.intervalMs) return;
    this.#lastAttempt = now;
    void this.take(streamSeq);
  }

  /** Writes a snapshot now: the index is read in one synchronous step, so it matches `streamSeq`; resolves false on failure. */
  async take(streamSeq: number): Promise<boolean> {
    if (this.#busy) return false;
    this.#busy = true;
    try {
      const d = this.#d;
      const takenAt = this.#wall();
      const snap: ReplicaSnapshot = {
        replica: this.#o.replicaId, streamSeq, takenAt, index: dumpIndex(d.index, d.now()),
        sessions: [...d.router.sessionBindings()].map(([id, t]) => [id, t.worker, t.dpRank]), streams: d.ingest.streamSeqs(),
      };
      const bytes = await encodeSnapshot(snap);
      await d.objects.put(this.objectName, bytes, { [META_FORMAT]: String(SNAPSHOT_FORMAT), [META_SEQ]: String(streamSeq), [META_TAKEN]: String(takenAt) });
      this.#total.inc({ result: "written" });
      this.#bytes.set(undefined, bytes.length);
      this.#lastTakenAt = takenAt;
      this.#refreshAge();
      return true;
    } catch (e) {
      this.#total.inc({ result: "write_failed" });
      this.#d.log(`snapshot ${this.objectName}: not written (${(e as Error).message})`);
      return false;
    } finally {
      this.#busy = false;
    }
  }

  #refreshAge(): void {
    if (this.#lastTakenAt !== undefined) this.#age.set(undefined, Math.max(0, (this.#wall() - this.#lastTakenAt) / 1000));
  }
}
