/**
 * @module Session bindings shared between router replicas through a JetStream KV bucket whose TTL is the session TTL: a
 * binding made on one replica is honoured by the others for the same session key. Values carry the writer's replica id
 * and boot nonce, so a replica skips its own echoes yet a restarted one gets its earlier bindings back.
 */
import { toBase64 } from "../core/base64.ts";
import type { MetricsRegistry } from "../gateway/metrics-registry.ts";
import type { NowFn } from "../routing/clock.ts";
import type { Router } from "../routing/router.ts";
import type { SyncKv } from "./sync-bus.ts";

export interface SessionShareOptions {
  replicaId: string;
  /** Random per process: tells this process's echoes from those of an earlier one with the same replica id. */
  boot: string;
  ttlMs: number;
  /** Sessions whose last publication is remembered (to skip re-publishing an unchanged binding); the router's session limit. */
  maxEntries: number;
}

interface Sent {
  worker: string;
  dpRank: number;
  at: number;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/** KV keys are subject tokens: a session id of any bytes becomes base64url of its UTF-8. */
export function sessionKey(id: string): string {
  return toBase64(enc.encode(id), true);
}

export class SessionShare {
  readonly #sent = new Map<string, Sent>();
  readonly #applied;
  readonly #published;

  constructor(private readonly kv: SyncKv, private readonly router: Router, registry: MetricsRegistry, private readonly now: NowFn,
    private readonly o: SessionShareOptions) {
    this.#applied = registry.counter("kvgate_sync_sessions_applied_total", "Session bindings other router replicas made (or this one before a restart), taken here");
    this.#applied.inc(undefined, 0);
    this.#published = registry.counter("kvgate_sync_sessions_published_total", "Session bindings this replica wrote to the shared bucket, by result (stored, failed)");
  }

  start(): void {
    this.kv.watch((key, value) => this.#onEntry(key, value));
  }

  /**
   * A booking with a session: its binding is published when new, moved, or not refreshed for a quarter of the TTL (the
   * bucket's TTL runs from each write, like the idle TTL here runs from each use).
   */
  booked(b: { sessionId?: string; worker: string; dpRank: number }): void {
    const id = b.sessionId;
    if (id === undefined) return;
    const now = this.now();
    const last = this.#sent.get(id);
    if (last && last.worker === b.worker && last.dpRank === b.dpRank && now - last.at < this.o.ttlMs / 4) return;
    this.#sent.delete(id);
    if (this.#sent.size >= this.o.maxEntries) this.#sent.delete(this.#sent.keys().next().value!);
    this.#sent.set(id, { worker: b.worker, dpRank: b.dpRank, at: now });
    const value = enc.encode(JSON.stringify({ r: this.o.replicaId, b: this.o.boot, s: id, w: b.worker, dp: b.dpRank }));
    void this.kv.put(sessionKey(id), value).then((ok) => {
      this.#published.inc({ result: ok ? "stored" : "failed" });
      if (!ok) this.#sent.delete(id);
    });
  }

  #onEntry(key: string, value: Uint8Array | undefined): void {
    if (!value) return;
    let m: { r?: unknown; b?: unknown; s?: unknown; w?: unknown; dp?: unknown };
    try {
      m = JSON.parse(dec.decode(value)) as typeof m;
    } catch {
      return;
    }
    if (m === null || typeof m !== "object") return;
    if (m.r === this.o.replicaId && m.b === this.o.boot) return;
    const { s, w, dp } = m;
    if (typeof s !== "string" || s.length > 4096 || sessionKey(s) !== key || typeof w !== "string" || typeof dp !== "number") return;
    if (!this.router.workerEntry(w)?.ranks.some((r) => r.dpRank === dp)) return;
    if (this.router.adoptSession(s, { worker: w, dpRank: dp })) {
      // What a peer bound need not be published again by this replica until it moves it or the refresh is due.
      this.#sent.set(s, { worker: w, dpRank: dp, at: this.now() });
      this.#applied.inc();
    }
  }
}
