/**
 * @module Leases on the bookings of streamed responses, for runtimes that can drop a gone client without telling
 * kvgate: workerd ends a request whose client left while its body was being written, and neither cancels the body
 * nor fires the request's signal, so the relay never runs again. Housekeeping on later requests gives back the
 * booking of a stream nobody has pulled from for the lease; a stream that does go on is not touched (it only
 * stops counting as load).
 */

/** One stream's side: report each pull, and end the lease when the stream ends by itself. */
export interface StreamLease {
  /** A pull began (the client is reading). */
  pulling(now: number): void;
  /** The pull returned; from now the client must pull again within the lease. */
  pulled(now: number): void;
  close(): void;
}

interface Live extends StreamLease {
  readonly release: () => void;
  inPull: boolean;
  since: number;
}

/** Where the runtime drops gone clients silently: a client that reads nothing for 10 s is taken as gone. */
export const DEFAULT_STREAM_LEASE_MS = 10_000;

export class StreamLeases {
  readonly #live = new Set<Live>();
  #expired = 0;

  /**
   * @param leaseMs longest wait for the client's next pull; 0 = off (the runtime reports gone clients itself).
   * @param pendingMs longest a single pull may stay pending (it waits on the worker, whose silence the idle timeout
   *   already bounds) before the stream counts as abandoned too.
   */
  constructor(readonly leaseMs: number, private readonly pendingMs: number) {}

  /**
   * Opens a lease; `release` gives back the booking when it expires (called from another request's housekeeping).
   * Undefined when leases are off.
   */
  open(now: number, release: () => void): StreamLease | undefined {
    if (this.leaseMs <= 0) return undefined;
    const live = this.#live;
    const lease: Live = {
      release, inPull: false, since: now,
      pulling(t) {
        lease.inPull = true;
        lease.since = t;
      },
      pulled(t) {
        lease.inPull = false;
        lease.since = t;
      },
      close() {
        live.delete(lease);
      },
    };
    live.add(lease);
    return lease;
  }

  /** Releases every lease that expired by `now`; returns how many. */
  sweep(now: number): number {
    let n = 0;
    for (const lease of this.#live) {
      const limit = lease.inPull ? this.pendingMs + this.leaseMs : this.leaseMs;
      if (now - lease.since < limit) continue;
      this.#live.delete(lease);
      n++;
      try {
        lease.release();
      } catch {
        // A release must not stop the sweep of the others.
      }
    }
    this.#expired += n;
    return n;
  }

  get size(): number {
    return this.#live.size;
  }

  get expired(): number {
    return this.#expired;
  }
}
