/**
 * @module Session → worker bindings: the first request of a session selects and binds, concurrent first requests wait
 * for that binding, later ones reuse it (pin or preference, decided by the router), idle sessions expire.
 */
import { KvgateError } from "../core/errors.ts";
import type { NowFn } from "./clock.ts";

export interface AffinityTarget {
  worker: string;
  dpRank: number;
}

/** "bound": use the target. "first": the caller selects, then must call bind() or abandon() with the token. */
export type SessionClaim = { kind: "bound"; target: AffinityTarget } | { kind: "first"; token: number };

export interface SessionOptions {
  ttlMs: number;
  maxEntries: number;
  maxIdBytes: number;
}

interface SessionEntry {
  target: AffinityTarget | undefined;
  /** Set while one request is selecting the binding; others wait on `waiters`. */
  init: { token: number; waiters: Set<() => void> } | undefined;
  /** Live bookings of this session; the idle TTL only runs while there are none. */
  leases: number;
  idleDeadline: number;
}

const utf8 = new TextEncoder();

export class SessionAffinity {
  readonly #entries = new Map<string, SessionEntry>();
  #token = 0;

  constructor(private readonly now: NowFn, private readonly options: SessionOptions) {}

  get size(): number {
    return this.#entries.size;
  }

  validateId(id: string): void {
    if (typeof id !== "string" || id.length === 0) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "session id must be a non-empty string");
    const max = this.options.maxIdBytes;
    if (id.length > max || utf8.encode(id).length > max) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `session id longer than ${max} bytes`);
    }
  }

  /** Current binding without waiting or taking part (query-only requests). */
  peek(id: string): AffinityTarget | undefined {
    const e = this.#entries.get(id);
    return e && !e.init && !this.#expired(e) ? e.target : undefined;
  }

  /** Resolves to the session's binding, or makes the caller its first request; waits while another request is binding. */
  async claim(id: string, signal?: AbortSignal): Promise<SessionClaim> {
    this.validateId(id);
    for (;;) {
      if (signal?.aborted) throw cancelled();
      let e = this.#entries.get(id);
      if (!e) e = this.#create(id);
      if (e.init) {
        await this.#wait(e.init.waiters, signal);
        continue;
      }
      if (e.target && !this.#expired(e)) return { kind: "bound", target: e.target };
      e.target = undefined;
      return { kind: "first", token: this.#begin(e) };
    }
  }

  /** The bound target vanished: if the binding is still `stale`, the caller becomes the request that re-binds. */
  takeOver(id: string, stale: AffinityTarget): number | undefined {
    const e = this.#entries.get(id);
    if (!e || e.init || !e.target || !sameTarget(e.target, stale)) return undefined;
    return this.#begin(e);
  }

  bind(id: string, token: number, target: AffinityTarget): void {
    const e = this.#owned(id, token);
    e.target = { worker: target.worker, dpRank: target.dpRank };
    this.#finish(e);
  }

  /** The first request failed or was cancelled: keep any previous target, wake the waiters so one of them binds. */
  abandon(id: string, token: number): void {
    const e = this.#entries.get(id);
    if (!e || e.init?.token !== token) return;
    this.#finish(e);
    if (!e.target && e.leases === 0) this.#entries.delete(id);
  }

  /** Soft mode moved the session to another worker. */
  rebind(id: string, target: AffinityTarget): void {
    const e = this.#entries.get(id);
    if (e && !e.init) e.target = { worker: target.worker, dpRank: target.dpRank };
  }

  /**
   * A binding another router replica made (src/replicas/session-share.ts): taken unless a request here is binding the
   * session right now (its own binding is shared in turn). Its idle TTL starts again. False when not taken.
   */
  adopt(id: string, target: AffinityTarget): boolean {
    let e = this.#entries.get(id);
    if (e?.init) return false;
    if (!e) {
      if (this.#entries.size >= this.options.maxEntries) this.reap();
      if (this.#entries.size >= this.options.maxEntries) return false;
      e = this.#create(id);
    }
    e.target = { worker: target.worker, dpRank: target.dpRank };
    if (e.leases === 0) e.idleDeadline = this.now() + this.options.ttlMs;
    return true;
  }

  /** The live bindings (none being made, none expired), for snapshots. */
  *bindings(): IterableIterator<[string, AffinityTarget]> {
    for (const [id, e] of this.#entries) if (e.target && !e.init && !this.#expired(e)) yield [id, e.target];
  }

  acquireLease(id: string): void {
    const e = this.#entries.get(id);
    if (e) e.leases++;
  }

  releaseLease(id: string): void {
    const e = this.#entries.get(id);
    if (!e || e.leases === 0) return;
    if (--e.leases === 0) {
      e.idleDeadline = this.now() + this.options.ttlMs;
      if (!e.target && !e.init) this.#entries.delete(id);
    }
  }

  /** Forgets bindings idle past their TTL; returns how many. */
  reap(): number {
    let n = 0;
    for (const [id, e] of this.#entries) {
      if (!e.init && this.#expired(e)) {
        this.#entries.delete(id);
        n++;
      }
    }
    return n;
  }

  /** Binding of a session (any state), for tests and the admin API. */
  inspect(id: string): { target?: AffinityTarget; initializing: boolean; leases: number } | undefined {
    const e = this.#entries.get(id);
    return e && { target: e.target, initializing: e.init !== undefined, leases: e.leases };
  }

  #expired(e: SessionEntry): boolean {
    return e.leases === 0 && this.now() >= e.idleDeadline;
  }

  #create(id: string): SessionEntry {
    if (this.#entries.size >= this.options.maxEntries) this.reap();
    if (this.#entries.size >= this.options.maxEntries) {
      throw new KvgateError("KVGATE_ERR_SESSION_LIMIT", `session table full (${this.options.maxEntries} sessions)`);
    }
    const e: SessionEntry = { target: undefined, init: undefined, leases: 0, idleDeadline: Infinity };
    this.#entries.set(id, e);
    return e;
  }

  #begin(e: SessionEntry): number {
    const token = ++this.#token;
    e.init = { token, waiters: new Set() };
    return token;
  }

  #owned(id: string, token: number): SessionEntry {
    const e = this.#entries.get(id);
    if (!e || e.init?.token !== token) throw new KvgateError("KVGATE_ERR_STATE", `session ${id} is not being bound by this request`);
    return e;
  }

  #finish(e: SessionEntry): void {
    const waiters = e.init?.waiters;
    e.init = undefined;
    if (e.leases === 0) e.idleDeadline = this.now() + this.options.ttlMs;
    for (const w of waiters ?? []) w();
  }

  #wait(waiters: Set<() => void>, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        waiters.delete(wake);
        reject(cancelled());
      };
      const wake = (): void => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      waiters.add(wake);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

function sameTarget(a: AffinityTarget, b: AffinityTarget): boolean {
  return a.worker === b.worker && a.dpRank === b.dpRank;
}

function cancelled(): KvgateError {
  return new KvgateError("KVGATE_ERR_CANCELLED", "request cancelled while waiting for its session's first binding");
}
