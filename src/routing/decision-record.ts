/**
 * @module What one routing decision saw and chose, candidate by candidate: the shape shared by the explain header,
 * the decision log, `kvgate explain` and the dashboard's decisions table. Types only; the router fills them.
 */
import type { RoutingPolicy } from "./routing-policy.ts";
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

/**
 * Everything else the score kernel and the selector's tie rules read, so `kvgate explain` can run the decision again
 * offline: filled only for a sink whose detail is "inputs" (the decision log).
 */
export interface DecisionInputs {
  policy: RoutingPolicy;
  overlapWeight: number;
  temperature: number;
  blockSize: number;
  lora?: string;
  namespace?: string;
  eagle?: boolean;
  /** The uniform draws the selection consumed, in order: the kernel's, then a warm tie's second run. */
  draws: number[];
  /** Per candidate, the tree size the kernel's tie rule read (0 unless a warm tie made the selector read it). */
  tree: number[];
  /** How a tie on the lowest cost was broken, when there was one the kernel's first run did not settle. */
  tie?: "rendezvous" | "tree";
  /**
   * The prompt's chained sequence hashes, one per complete block, as (lo, hi) u32 words: a copy, not text, since
   * formatting 500 hashes as hex costs ~0.5 ms and belongs to the log writer, not the routing path.
   */
  sequenceWords: Uint32Array;
  /** The prompt's token ids, when the log was asked to keep them (then explain re-hashes and checks the hashes). */
  tokens?: Uint32Array;
}

/**
 * How much a sink wants: the candidates table, or the table plus the inputs a replay needs. (A consumer of the
 * signals alone listens on RouterObserver.routed, which costs no record.)
 */
export type DecisionDetail = "candidates" | "inputs";

/** A decision as recorded: the request's identity, every candidate, and what was chosen (as exposed in headers). */
export interface DecisionRecord {
  /** The router clock's reading (ms) when the decision was made. */
  at: number;
  model: string;
  signals: RouteSignals;
  /** Empty when the worker was chosen without scoring (explicit target, session, plan). */
  candidates: DecisionCandidate[];
  /** Index of the chosen worker in `candidates` (-1 when they are empty). */
  chosen?: number;
  /** Present when the sink's detail is "inputs". */
  inputs?: DecisionInputs;
}

/** Where decisions go once made: a bounded ring for /v1/stats and the dashboard, the decision log, tests. */
export interface DecisionSink {
  /** What to fill; default "candidates". */
  readonly detail?: DecisionDetail;
  /** With "inputs": keep the prompt's token ids too (explain then re-hashes them). Default false. */
  readonly tokens?: boolean;
  /** Called synchronously once the decision is booked; must not throw. */
  decided(record: DecisionRecord): void;
}
