/** @module The live load of one (worker, data-parallel rank): the numbers the cost function and busy checks read. */
import { ActivePrompts } from "./active-prompts.ts";

/**
 * Mutated only by ActiveSequences so the totals always equal the sum over live bookings (the property test checks it).
 * With KV reuse assumed, active blocks are distinct prompt blocks (shared prefixes counted once); otherwise a plain sum.
 */
/** What the engine itself last reported for this rank (its /metrics), next to the router's own accounting. */
export interface EngineReport {
  running: number;
  waiting: number;
  /** KV-cache usage 0..1, when the engine reports it. */
  kvUsage?: number;
  /** No successful scrape for too long: the numbers are old, and the rank counts as saturated. */
  stale: boolean;
}

/** Bookings other router replicas hold on this rank (src/replicas/), summed; kept apart from the local totals. */
export interface RemoteLoad {
  requests: number;
  prefillTokens: number;
  blocks: number;
}

export class RankLoad {
  readonly prompts = new ActivePrompts();
  /** Prompt blocks of live bookings, summed without dedupe (used when KV reuse is not assumed). */
  summedBlocks = 0;
  activePrefillTokens = 0;
  activeRequests = 0;
  /** Blocks the live bookings are expected to add while decoding (decode-aware load; 0 when it is off). */
  outputBlocks = 0;
  /** The engine's own report (scraped /metrics), when the gateway scrapes it. */
  engine: EngineReport | undefined = undefined;
  /** KV blocks in use as the engine reports them (usage × capacity); 0 when unknown or stale. The cost takes the larger of this and activeBlocks. */
  engineBlocks = 0;
  /** Other replicas' bookings here; the cost adds them to the local prefill and decode load. */
  remote: RemoteLoad = { requests: 0, prefillTokens: 0, blocks: 0 };

  constructor(readonly assumeKvReuse: boolean) {}

  get activeBlocks(): number {
    return this.assumeKvReuse ? this.prompts.distinctBlocks : this.summedBlocks;
  }
}
