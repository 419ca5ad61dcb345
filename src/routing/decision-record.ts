/**
 * @module What one routing decision saw and chose, candidate by candidate: the shape shared by the explain header,
 * the decision log, `kvgate explain` and the dashboard's decisions table. Types only; the router fills them.
 */
import type { RouteSignals } from "./routing-types.ts";

/** One (worker, rank) the cost function weighed, with the inputs it read and the cost it gave. */
export interface DecisionCandidate {
  worker: string;
  dpRank: number;
  /** Prompt blocks the index says this rank caches (0 for a cold worker, whose entries are not trusted). */
  overlapBlocks: number;
  /** Prefill tokens the cost counted as already queued here (own bookings plus other replicas'). */
  prefillTokens: number;
  /** Decode blocks the cost counted as active here. */
  decodeBlocks: number;
  /** Leading prompt blocks that in-flight prompts on this rank already hold. */
  activeOverlapBlocks: number;
  cost: number;
}

/** A decision as recorded: the request's identity, every candidate, and what was chosen (as exposed in headers). */
export interface DecisionRecord {
  /** The router clock's reading (ms) when the decision was made. */
  at: number;
  model: string;
  signals: RouteSignals;
  /** Empty when the worker was chosen without scoring (explicit target, session, plan). */
  candidates: DecisionCandidate[];
}

/** Where decisions go once made: a bounded ring for /v1/stats and the dashboard, the decision log, tests. */
export interface DecisionSink {
  decided(record: DecisionRecord): void;
}
