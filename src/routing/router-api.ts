/**
 * @module The router's contract with its callers, apart from the Router class itself: what it is built from, what it
 * tells observers, what routing resolves to, and the error a queue rejection becomes.
 */
import { KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import type { NowFn } from "./clock.ts";
import type { BlindInfo, DistrustInfo } from "./closed-loop.ts";
import type { DecisionRecord, DecisionSink } from "./decision-record.ts";
import type { RandomSource } from "./prng.ts";
import type { RequestHandle } from "./request-handle.ts";
import type { FreeReason, QueueRejection, RouteSignals } from "./routing-types.ts";
import { Capture, type CaptureLevel } from "./selector.ts";
import type { CommitOutcome, PlanClosed, PlanView } from "./two-phase.ts";

export interface FreedInfo {
  bookingId: number;
  requestId: string;
  worker: string;
  dpRank: number;
  reason: FreeReason;
}

/** Hooks for metrics and tests; called synchronously, must not throw. */
export interface RouterObserver {
  routed?(signals: RouteSignals): void;
  /** `keys`: the prompt's sequence hashes as (lo, hi) u32 pairs, `blocks` of them, valid only during the call. */
  /** `outputBlocks`: the decode blocks the booking expects to grow by (decode-aware load), beside its prompt's `blocks`. */
  booked?(info: { bookingId: number; requestId: string; worker: string; dpRank: number; prefillTokens: number; blocks: number; outputBlocks: number; sessionId?: string; keys?: Uint32Array }): void;
  /** The booking's first token: its prefill stopped loading the worker. */
  prefillDone?(info: { bookingId: number; worker: string; dpRank: number }): void;
  freed?(info: FreedInfo): void;
  /** Approximate mode recorded the routed prompt on the rank; the index's last prompt is still that prompt during the call. */
  recorded?(info: { worker: string; dpRank: number }): void;
  /** A two-phase plan opened (commit) or closed (complete, cancel, TTL, or its booking freed otherwise). */
  planOpened?(plan: PlanView): void;
  planClosed?(info: PlanClosed): void;
  /** The closed loop dropped a precise rank's index entries: its engine kept reporting far fewer hits than predicted. */
  distrusted?(info: DistrustInfo): void;
  /** The closed loop found a KV-event rank blind (its engine reports hits no event announced), or its events back. */
  blind?(info: BlindInfo): void;
}

export interface RouterDeps {
  index: KvIndex;
  /** Milliseconds; drives TTLs, queue waits, stale expiry and deadlines. */
  now: NowFn;
  /** Uniform draws in [0, 1); default: a PRNG seeded with config.seed. */
  random?: RandomSource;
  /** Fine timer for the timing signals; default performance.now. */
  fineNow?: NowFn;
  observer?: RouterObserver;
  /** Told every booked decision with its candidates (and inputs, per its detail); none: nothing is copied. */
  decisions?: DecisionSink;
}

export type RouteOutcome =
  | { kind: "routed"; signals: RouteSignals; handle: RequestHandle; decision?: DecisionRecord }
  | { kind: "queue_rejected"; rejection: QueueRejection }
  | { kind: "query"; signals: RouteSignals };

export type { CommitOutcome };

export interface TickReport {
  expiredBookings: number;
  expiredPlans: number;
  queueExpired: number;
  sessionsReaped: number;
  approxBlocksExpired: number;
  /** Blocks of in-flight prompts recorded again on ranks modelled by their routes (RoutingCore.refreshInflight). */
  approxBlocksRefreshed: number;
}

/** How much of each decision the selector copies out for the sink. */
export function captureFor(sink: DecisionSink | undefined): CaptureLevel {
  if (!sink) return Capture.none;
  if (sink.detail !== "inputs") return Capture.candidates;
  return sink.tokens ? Capture.inputsWithTokens : Capture.inputs;
}

export function isQueueRejected(o: RouteOutcome | CommitOutcome): o is { kind: "queue_rejected"; rejection: QueueRejection } {
  return o.kind === "queue_rejected";
}

/** The KvgateError (429) a gateway answers a queue rejection with; Retry-After is in detail.retryAfterMs. */
export function queueRejectedError(r: QueueRejection): KvgateError {
  const what = r.limit === "length" ? `router queue is full (${r.current}/${r.max})` : `waited ${r.current} ms in the router queue (max ${r.max})`;
  return new KvgateError("KVGATE_ERR_QUEUE_REJECTED", what, { ...r });
}
