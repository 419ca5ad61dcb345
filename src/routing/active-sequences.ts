/**
 * @module Bookings of in-flight requests per (worker, rank): book at selection, drop the prefill share at the first
 * token, free exactly once at completion, failure, cancel, worker removal or stale expiry.
 */
import { KvgateError } from "../core/errors.ts";
import type { NowFn } from "./clock.ts";
import type { InflightPrefixes } from "./inflight-prefixes.ts";
import { KeyPool } from "./key-pool.ts";
import { RequestTable } from "./request-table.ts";
import type { FreeReason } from "./routing-types.ts";
import type { RankState } from "./worker-registry.ts";

export interface Booking {
  /** Unique per booking, so a stale handle from an earlier attempt can never free a later one with the same request id. */
  readonly id: number;
  readonly requestId: string;
  readonly rank: RankState;
  /** Uncached prompt tokens; counted in the rank's prefill load until the first output token. */
  readonly prefillTokens: number;
  /** Complete prompt blocks. */
  readonly blocks: number;
  /** Blocks the request is expected to grow by while decoding (counted in the rank's load until it is freed). */
  readonly outputBlocks: number;
  /**
   * Sequence hashes of the prompt blocks as (lo, hi) u32 pairs, in pooled storage; absent when KV reuse is not
   * assumed, and cleared at free (the buffer goes back to the pool).
   */
  keys: Uint32Array | undefined;
  readonly bookedAt: number;
  /** When the prompt was last recorded on a rank modelled by its routes, and that rank's recorded blocks then (RoutingCore.refreshInflight). */
  recordedAt: number;
  recordedMark: number;
  readonly sessionId: string | undefined;
  prefillDone: boolean;
  freed: FreeReason | undefined;
  /** Position in its ActiveSequences' live list while booked; -1 once freed. */
  at: number;
}

export interface BookingInput {
  requestId: string;
  prefillTokens: number;
  blocks: number;
  /** Expected decode growth in blocks (decode-aware load); default 0. */
  outputBlocks?: number;
  /** At least 2 × `blocks` words; copied at booking, so a caller may reuse its buffer afterwards. */
  keys: Uint32Array | undefined;
  sessionId?: string;
}

export interface ActiveSequencesOptions {
  staleBookingMs: number;
  staleCheckEveryMs: number;
  /** Fleet-wide index of the bookings' prompts, kept in step with them (selection reads it). */
  inflight?: InflightPrefixes;
  /** Called once per freed booking, after the load was released. */
  onFree?: (booking: Booking, reason: FreeReason) => void;
}

export class ActiveSequences {
  readonly #byRequest = new RequestTable<Booking>();
  /**
   * Live bookings, unordered (a freed one is swapped with the last): no hash table keyed per booking, whose churn V8
   * compacts in one go every few hundred inserts (see RequestTable).
   */
  readonly #live: Booking[] = [];
  readonly #keyPool = new KeyPool();
  #nextId = 1;
  #lastStaleCheck = -Infinity;

  constructor(private readonly now: NowFn, private readonly options: ActiveSequencesOptions) {}

  get size(): number {
    return this.#live.length;
  }

  book(rank: RankState, input: BookingInput): Booking {
    if (this.#byRequest.has(input.requestId)) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `request ${input.requestId} already holds a booking; free it before routing again`);
    }
    const now = this.now();
    const b: Booking = {
      id: this.#nextId++, requestId: input.requestId, rank, prefillTokens: Math.max(0, input.prefillTokens),
      blocks: input.blocks, outputBlocks: Math.max(0, input.outputBlocks ?? 0), keys: input.keys && input.blocks > 0 ? this.#keyPool.copy(input.keys, 2 * input.blocks) : undefined, bookedAt: now, recordedAt: now, recordedMark: 0, sessionId: input.sessionId, prefillDone: false, freed: undefined,
      at: this.#live.length,
    };
    rank.load.book(b.prefillTokens, b.blocks, b.outputBlocks, b.keys);
    if (b.keys) this.options.inflight?.add(b.keys, b.blocks, rank.slot);
    this.#byRequest.set(b.requestId, b);
    this.#live.push(b);
    return b;
  }

  get(requestId: string): Booking | undefined {
    return this.#byRequest.get(requestId);
  }

  /** First output token: the prompt is computed, so its prefill tokens stop counting. Returns false if already done or freed. */
  markPrefillComplete(b: Booking): boolean {
    if (b.freed !== undefined || b.prefillDone) return false;
    b.prefillDone = true;
    b.rank.load.prefillDone(b.prefillTokens);
    return true;
  }

  /** Releases the booking's load; true the first time, false on every later call (exactly once). */
  free(b: Booking, reason: FreeReason): boolean {
    if (b.freed !== undefined || this.#live[b.at] !== b) return false;
    const load = b.rank.load;
    if (b.keys && !load.removePrompt(b.keys, b.blocks)) {
      throw new KvgateError("KVGATE_ERR_STATE", `booking ${b.id} of ${b.requestId} was not among its rank's prompts`);
    }
    if (b.keys) {
      if (this.options.inflight && !this.options.inflight.remove(b.keys, b.blocks)) {
        throw new KvgateError("KVGATE_ERR_STATE", `booking ${b.id} of ${b.requestId} was not among the in-flight prompts`);
      }
      this.#keyPool.release(b.keys);
      b.keys = undefined;
    }
    b.freed = reason;
    load.release(b.prefillDone ? 0 : b.prefillTokens, b.blocks, b.outputBlocks);
    const last = this.#live.pop()!;
    if (last !== b) {
      this.#live[b.at] = last;
      last.at = b.at;
    }
    b.at = -1;
    if (this.#byRequest.get(b.requestId) === b) this.#byRequest.delete(b.requestId);
    this.options.onFree?.(b, reason);
    return true;
  }

  /** Frees every booking on the given ranks (worker removal). */
  freeRanks(ranks: readonly RankState[], reason: FreeReason): Booking[] {
    const out: Booking[] = [];
    const gone = new Set(ranks);
    // Worker removal is rare: a scan of the live bookings keeps booking and freeing free of per-rank bookkeeping.
    for (const b of this.#live.filter((x) => gone.has(x.rank))) if (this.free(b, reason)) out.push(b);
    return out;
  }

  /** expireStale(), at most once per staleCheckEveryMs: cheap enough for the booking path. */
  expireStaleIfDue(now = this.now()): number {
    return now - this.#lastStaleCheck >= this.options.staleCheckEveryMs ? this.expireStale(now) : 0;
  }

  /** Force-frees bookings older than the stale limit; returns how many. */
  expireStale(now = this.now()): number {
    this.#lastStaleCheck = now;
    const limit = now - this.options.staleBookingMs;
    const old: Booking[] = [];
    // A full scan rather than stopping at the first young booking: an injected clock need not be monotonic.
    for (const b of this.#live) if (b.bookedAt <= limit) old.push(b);
    for (const b of old) this.free(b, "expired");
    return old.length;
  }

  /** The live bookings, in no particular order (a snapshot: freeing while iterating it is safe). */
  live(): Booking[] {
    return this.#live.slice();
  }
}
