/**
 * @module Two-phase routing for a proxy that sends the request itself: commit books a worker now under a plan id, and
 * the proxy later reports the first token, completion or cancellation on that id. A plan left unreported past its TTL
 * is freed, so a proxy that loses track of a request cannot leak load; open plans are capped.
 */
import { KvgateError } from "../core/errors.ts";
import type { Booking } from "./active-sequences.ts";
import type { NowFn } from "./clock.ts";
import type { Settle } from "./admit-request.ts";
import type { HandleOps } from "./request-handle.ts";
import { validateRequest } from "./request-validation.ts";
import type { DecisionRecord } from "./decision-record.ts";
import type { FreeReason, QueueRejection, RouteRequest, RouteSignals } from "./routing-types.ts";

/** prefill: booked, no first token yet; decode: the prompt is computed, only the decode blocks still load the worker. */
export type PlanState = "prefill" | "decode";

/** What a caller may know of an open (or just closed) plan. */
export interface PlanView {
  readonly id: string;
  readonly requestId: string;
  readonly worker: string;
  readonly dpRank: number;
  readonly state: PlanState;
  /** Injected-clock time (ms) at which an unreported plan is freed. */
  readonly expiresAt: number;
}

export interface PlanClosed {
  planId: string;
  requestId: string;
  worker: string;
  /** finished (complete), cancelled, plan_expired (TTL), or whatever freed the booking first (stale expiry, worker removal). */
  reason: FreeReason;
}

export interface TwoPhaseOptions {
  ttlMs: number;
  maxOpen: number;
  onClosed?(info: PlanClosed): void;
}

interface PlanRecord {
  readonly id: string;
  readonly booking: Booking;
  /** Renewed by first_token and keepalive reports, so a long stream whose proxy reports keeps its booking. */
  expiresAt: number;
}

export type CommitOutcome =
  | { kind: "committed"; plan: PlanView; signals: RouteSignals; decision?: DecisionRecord }
  | { kind: "queue_rejected"; rejection: QueueRejection };

/** A reserved place under the cap, taken before admission (which may wait in the queue) and given back on failure. */
export interface PlanReservation {
  readonly id: string;
  release(): void;
}

function viewOf(r: PlanRecord): PlanView {
  const b = r.booking;
  return { id: r.id, requestId: b.requestId, worker: b.rank.worker.id, dpRank: b.rank.dpRank, state: b.prefillDone ? "decode" : "prefill", expiresAt: r.expiresAt };
}

export class TwoPhase {
  /** Insertion order is expiry order: one TTL for every plan and a clock that does not go back. */
  readonly #byId = new Map<string, PlanRecord>();
  readonly #byBooking = new Map<number, PlanRecord>();
  /** Ids of commits still being admitted (they count against the cap). */
  readonly #reserved = new Set<string>();

  constructor(private readonly now: NowFn, private readonly ops: HandleOps, private readonly options: TwoPhaseOptions) {}

  get openPlans(): number {
    return this.#byId.size;
  }

  /**
   * Admits and books `req` as route() does (`admit`), then opens its plan under `id`. The place under the cap is
   * taken first, since admission may wait in the queue, and given back if the request is not admitted.
   */
  commit(req: RouteRequest, id: string, admit: <T>(settle: Settle<T>) => Promise<T>, opened?: (plan: PlanView) => void): Promise<CommitOutcome> {
    let reservation: PlanReservation | undefined;
    try {
      validateRequest(req);
      if (req.queryOnly) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "a query-only request cannot be committed");
      const r = (reservation = this.reserve(id));
      return admit((out): CommitOutcome => {
        if (out.kind !== "admitted") {
          r.release();
          return { kind: "queue_rejected", rejection: out.rejection };
        }
        const plan = this.open(r, out.value.booking);
        opened?.(plan);
        return out.value.decision ? { kind: "committed", plan, signals: out.value.signals, decision: out.value.decision } : { kind: "committed", plan, signals: out.value.signals };
      }).catch((e: unknown) => {
        r.release();
        throw e;
      });
    } catch (e) {
      reservation?.release();
      return Promise.reject(e);
    }
  }

  /** Takes a place for a commit; throws PLAN_LIMIT past the cap, BAD_ARGUMENT for an id already in use. */
  reserve(id: string): PlanReservation {
    if (this.#byId.has(id) || this.#reserved.has(id)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `plan id ${id} is already in use`);
    const max = this.options.maxOpen;
    if (this.#byId.size + this.#reserved.size >= max) {
      throw new KvgateError("KVGATE_ERR_PLAN_LIMIT", `too many open route plans (${max}); report complete or cancel on open plans, or raise the limit`, { max });
    }
    this.#reserved.add(id);
    return { id, release: () => void this.#reserved.delete(id) };
  }

  /** Opens the plan on an admitted booking. A booking freed before this continuation ran cannot be planned. */
  open(reservation: PlanReservation, booking: Booking): PlanView {
    reservation.release();
    if (booking.freed !== undefined) {
      throw new KvgateError("KVGATE_ERR_NO_WORKERS", `the booking of ${booking.requestId} ended (${booking.freed}) before its plan opened`);
    }
    const rec: PlanRecord = { id: reservation.id, booking, expiresAt: this.now() + this.options.ttlMs };
    this.#byId.set(rec.id, rec);
    this.#byBooking.set(booking.id, rec);
    return viewOf(rec);
  }

  get(id: string): PlanView | undefined {
    const r = this.#byId.get(id);
    return r && viewOf(r);
  }

  /** The first token arrived: the prompt's prefill tokens stop loading the worker, and the TTL starts again. Idempotent. */
  firstToken(id: string): PlanView {
    const r = this.#require(id);
    this.ops.firstToken(r.booking);
    return this.#renew(r);
  }

  /** The proxy's request is still running: the TTL starts again (a stream longer than the TTL sends these). */
  keepAlive(id: string): PlanView {
    return this.#renew(this.#require(id));
  }

  /** Frees the booking (complete: finished, whether or not a first token was reported; cancel: cancelled). */
  end(id: string, reason: "finished" | "cancelled"): PlanView {
    const r = this.#require(id);
    const view = viewOf(r);
    // free() calls back into onFree, which closes the record.
    this.ops.free(r.booking, reason);
    return view;
  }

  /** Frees plans whose TTL passed. Nothing to do, and nothing allocated, while no plan is open or due. */
  expire(now: number): number {
    if (this.#byId.size === 0) return 0;
    let n = 0;
    for (const r of this.#byId.values()) {
      if (now < r.expiresAt) break;
      // Deleting the visited entry while iterating a Map is safe: iteration continues with the next one.
      if (this.ops.free(r.booking, "plan_expired")) n++;
    }
    return n;
  }

  /** Called for every freed booking: a plan whose booking went away (by report, TTL, stale expiry, removal) closes. */
  onFree(b: Booking, reason: FreeReason): void {
    const r = this.#byBooking.get(b.id);
    if (!r) return;
    this.#byBooking.delete(b.id);
    this.#byId.delete(r.id);
    this.options.onClosed?.({ planId: r.id, requestId: b.requestId, worker: b.rank.worker.id, reason });
  }

  /**
   * Every renewal sets now + the one TTL, so moving the plan to the end keeps #byId in expiry order for expire(). A plan
   * whose booking the report itself ended (its drain freed a stale booking) stays closed.
   */
  #renew(r: PlanRecord): PlanView {
    if (this.#byId.delete(r.id)) {
      r.expiresAt = this.now() + this.options.ttlMs;
      this.#byId.set(r.id, r);
    }
    return viewOf(r);
  }

  #require(id: string): PlanRecord {
    const r = this.#byId.get(id);
    if (!r) throw new KvgateError("KVGATE_ERR_PLAN_NOT_FOUND", `no open route plan ${id} (unknown, already completed or cancelled, or expired)`);
    return r;
  }
}
