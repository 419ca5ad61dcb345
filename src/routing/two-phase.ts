/**
 * @module Two-phase routing: preview a decision without admission, plan it (book the previewed worker), dispatch the
 * plan — one cleanup deadline across all three, and cancelling releases whatever was booked. Plus the prefill busy probe.
 */
import { KvgateError } from "../core/errors.ts";
import type { Booking } from "./active-sequences.ts";
import { saturated } from "./busy-policy.ts";
import { phaseOf } from "./candidates.ts";
import { DEFAULT_MAX_BATCHED_TOKENS } from "./router-config.ts";
import { RequestHandle, type HandleOps } from "./request-handle.ts";
import { validateRequest } from "./request-validation.ts";
import type { Pending, RoutingCore } from "./routing-core.ts";
import type { FreeReason, QueueRejection, RouteRequest, RouteSignals, WorkerRole } from "./routing-types.ts";

/** One deadline (injected clock, ms) that preview hands to plan and plan to dispatch. */
export interface CleanupBudget {
  readonly deadline: number;
}

export interface RoutePreview {
  readonly requestId: string;
  readonly phase: WorkerRole;
  readonly signals: RouteSignals;
  readonly budget: CleanupBudget;
}

export type PlanState = "planned" | "dispatched" | "released";

interface PlanRecord {
  state: PlanState;
  endedBy?: FreeReason;
  readonly booking: Booking;
  readonly pending: Pending;
  detach(): void;
}

/** Internal state of each plan, out of reach of callers (who only hold the RoutePlan). */
const records = new WeakMap<RoutePlan, PlanRecord>();

function recordOf(plan: RoutePlan): PlanRecord {
  const rec = records.get(plan);
  if (!rec) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "not a plan made by this router");
  return rec;
}

/** A booked, not yet dispatched decision. Dropping it without dispatch or cancel is safe: the deadline releases it. */
export class RoutePlan {
  constructor(readonly requestId: string, readonly signals: RouteSignals, readonly budget: CleanupBudget, record: PlanRecord) {
    records.set(this, record);
  }

  get state(): PlanState {
    return recordOf(this).state;
  }

  /** Why the booking was released before dispatch (cancel, deadline, worker removal, stale expiry). */
  get endedBy(): FreeReason | undefined {
    return recordOf(this).endedBy;
  }
}

export type PlanOutcome = { kind: "planned"; plan: RoutePlan } | { kind: "queue_rejected"; rejection: QueueRejection };

export interface PrefillProbe {
  busy: boolean;
  /** all_busy: every prefill worker over a busy threshold; saturated: a request would be queued; load: chosen worker over t. */
  reason: "all_busy" | "saturated" | "load" | "idle";
  worker?: string;
  dpRank?: number;
  activePrefillTokens?: number;
  /** Prefill tokens the chosen worker takes per batch (max batched tokens, or the large default when unknown). */
  capacity?: number;
}

export class TwoPhase {
  readonly #open = new Map<number, PlanRecord>();

  constructor(private readonly core: RoutingCore, private readonly handleOps: HandleOps) {}

  get openPlans(): number {
    return this.#open.size;
  }

  /** Selection without admission or booking; the session binding is read, not taken. */
  async preview(req: RouteRequest): Promise<RoutePreview> {
    validateRequest(req);
    const p: Pending = { req, startedAt: this.core.now(), bindAtBook: false };
    await this.core.enterSession(p, true);
    const { signals } = this.core.selectOnly(p);
    return { requestId: req.requestId, phase: phaseOf(req), signals, budget: { deadline: p.startedAt + this.core.config.cleanupTimeoutMs } };
  }

  /** Books the previewed worker (through the queue when saturated). The request id and phase must match the preview's. */
  async plan(req: RouteRequest, preview: RoutePreview): Promise<PlanOutcome> {
    validateRequest(req);
    if (req.requestId !== preview.requestId) {
      throw new KvgateError("KVGATE_ERR_PLAN_MISMATCH", `preview belongs to request ${preview.requestId}, not ${req.requestId}`);
    }
    if (phaseOf(req) !== preview.phase) {
      throw new KvgateError("KVGATE_ERR_PLAN_MISMATCH", `preview was for the ${preview.phase} phase, not ${phaseOf(req)}`);
    }
    const t = req.target;
    if (t && (t.worker !== preview.signals.worker || (t.dpRank !== undefined && t.dpRank !== preview.signals.dpRank))) {
      throw new KvgateError("KVGATE_ERR_PLAN_MISMATCH", `explicit target ${t.worker} disagrees with the previewed ${preview.signals.worker}`);
    }
    const deadline = preview.budget.deadline;
    if (this.core.now() >= deadline) throw deadlineError("plan");
    const planned = { worker: preview.signals.worker, dpRank: preview.signals.dpRank };
    const p: Pending = { req, startedAt: this.core.now(), planned, bindAtBook: false, deadline };
    await this.core.enterSession(p, false);
    try {
      const bound = p.session?.target;
      if (bound && this.core.config.affinityMode === "hard" && (bound.worker !== planned.worker || bound.dpRank !== planned.dpRank)) {
        throw new KvgateError("KVGATE_ERR_SESSION_CONFLICT", `session is now bound to ${bound.worker}/${bound.dpRank}; preview again`);
      }
      const out = await this.core.admit(p);
      if (out.kind === "rejected") {
        this.core.leaveSession(p);
        return { kind: "queue_rejected", rejection: out.rejection };
      }
      const { booking, signals } = out.value;
      const record: PlanRecord = { state: "planned", booking, pending: p, detach: () => {} };
      const plan = new RoutePlan(req.requestId, signals, preview.budget, record);
      if (booking.freed !== undefined) {
        // Admitted from the queue, then freed (worker removed, expiry) before this continuation ran.
        record.state = "released";
        record.endedBy = booking.freed;
        this.core.leaveSession(p);
        return { kind: "planned", plan };
      }
      this.#open.set(booking.id, record);
      const signal = req.signal;
      if (signal) {
        const onAbort = (): void => void this.#release(record, "cancelled");
        signal.addEventListener("abort", onAbort, { once: true });
        record.detach = () => signal.removeEventListener("abort", onAbort);
        if (signal.aborted) this.#release(record, "cancelled");
      }
      return { kind: "planned", plan };
    } catch (e) {
      this.core.leaveSession(p);
      throw e;
    }
  }

  /** Commits the plan: the booking now belongs to the stream (end it through the handle) and the session binds. */
  dispatch(req: RouteRequest, plan: RoutePlan): RequestHandle {
    const rec = recordOf(plan);
    if (req.requestId !== plan.requestId) {
      throw new KvgateError("KVGATE_ERR_PLAN_MISMATCH", `plan belongs to request ${plan.requestId}, not ${req.requestId}`);
    }
    if (rec.state === "dispatched") throw new KvgateError("KVGATE_ERR_STATE", `plan of ${plan.requestId} was already dispatched`);
    if (rec.state === "planned" && this.core.now() >= plan.budget.deadline) this.#release(rec, "plan_expired");
    if (rec.state === "released") throw releasedError(plan.requestId, rec.endedBy);
    rec.state = "dispatched";
    rec.detach();
    this.#open.delete(rec.booking.id);
    const s = rec.pending.session;
    if (s && !s.readOnly) this.core.bindSession(s, rec.booking.rank);
    return new RequestHandle(rec.booking, this.handleOps);
  }

  /** Releases a plan's booking; false if it was already dispatched or released. */
  cancel(plan: RoutePlan): boolean {
    return this.#release(recordOf(plan), "cancelled");
  }

  /** Releases plans whose cleanup deadline passed; returns how many. */
  expire(now: number): number {
    let n = 0;
    for (const rec of [...this.#open.values()]) {
      const deadline = rec.pending.deadline ?? Infinity;
      if (now >= deadline && this.#release(rec, "plan_expired")) n++;
    }
    return n;
  }

  /** Called for every freed booking: a plan whose booking went away (expiry, worker removal) is released with it. */
  onFree(b: Booking, reason: FreeReason): void {
    const rec = this.#open.get(b.id);
    if (!rec) return;
    this.#open.delete(b.id);
    rec.state = "released";
    rec.endedBy ??= reason;
    rec.detach();
    this.core.leaveSession(rec.pending);
  }

  #release(rec: PlanRecord, reason: FreeReason): boolean {
    if (rec.state !== "planned") return false;
    rec.endedBy = reason;
    // free() calls back into onFree, which closes the record and gives up the session claim.
    return this.handleOps.free(rec.booking, reason);
  }

  /** Advisory: would a prefill for this request land on a worker loaded above t × its batch capacity? Books nothing. */
  async prefillBusy(req: RouteRequest, threshold: number): Promise<PrefillProbe> {
    if (!(threshold >= 0)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `threshold must be >= 0, got ${threshold}`);
    const probe: RouteRequest = { ...req, phase: "prefill", queryOnly: true };
    validateRequest(probe);
    const p: Pending = { req: probe, startedAt: this.core.now(), bindAtBook: false };
    await this.core.enterSession(p, true);
    let r;
    try {
      r = this.core.resolve(p);
    } catch (e) {
      if (e instanceof KvgateError && e.code === "KVGATE_ERR_ALL_WORKERS_BUSY") return { busy: true, reason: "all_busy" };
      throw e;
    }
    if (saturated(r.pinned ? [r.pinned] : r.candidates, this.core.config.queueThreshold)) return { busy: true, reason: "saturated" };
    const { selection } = this.core.selectOnly(p, r);
    const rank = selection.rank;
    const capacity = rank.worker.maxBatchedTokens ?? DEFAULT_MAX_BATCHED_TOKENS;
    const active = rank.load.activePrefillTokens;
    const busy = active > threshold * capacity;
    return { busy, reason: busy ? "load" : "idle", worker: rank.worker.id, dpRank: rank.dpRank, activePrefillTokens: active, capacity };
  }
}

function deadlineError(stage: string): KvgateError {
  return new KvgateError("KVGATE_ERR_DEADLINE_EXCEEDED", `cleanup deadline passed before ${stage}`);
}

function releasedError(requestId: string, reason: FreeReason | undefined): KvgateError {
  switch (reason) {
    case "plan_expired": return deadlineError("dispatch");
    case "cancelled": return new KvgateError("KVGATE_ERR_CANCELLED", `plan of ${requestId} was cancelled`);
    case "worker_removed": return new KvgateError("KVGATE_ERR_NO_WORKERS", `the planned worker of ${requestId} was removed`);
    default: return new KvgateError("KVGATE_ERR_STATE", `plan of ${requestId} was released (${reason ?? "unknown"})`);
  }
}
