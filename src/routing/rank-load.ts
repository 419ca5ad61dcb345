/** @module The live load of one (worker, data-parallel rank): the numbers the cost function and busy checks read. */
import { ActivePrompts } from "./active-prompts.ts";

/**
 * Mutated only by ActiveSequences so the totals always equal the sum over live bookings (the property test checks it).
 * With KV reuse assumed, active blocks are distinct prompt blocks (shared prefixes counted once); otherwise a plain sum.
 */
export class RankLoad {
  readonly prompts = new ActivePrompts();
  /** Prompt blocks of live bookings, summed without dedupe (used when KV reuse is not assumed). */
  summedBlocks = 0;
  activePrefillTokens = 0;
  activeRequests = 0;

  constructor(readonly assumeKvReuse: boolean) {}

  get activeBlocks(): number {
    return this.assumeKvReuse ? this.prompts.distinctBlocks : this.summedBlocks;
  }
}
