/**
 * @module What one approximate-mode answer says about its engine's cache size. When a prompt is recorded, the core
 * says per block how many blocks routed to the rank ago the block (or an earlier one of the prompt) was last routed
 * there (NEEDS, docs/abi.md). An engine that reports a shorter prefix than predicted evicted its first missing block,
 * so its LRU cache holds fewer blocks than were routed there since: one answer bounds the capacity from above, where
 * the step learner (capacity-learner.ts) would take a dozen answers to walk down to it.
 */
import type { KvIndex } from "../core/kv-index.ts";
import { NEED_NEVER } from "../wasm/abi.ts";

/** Kept per approximate decision until its answer: the needs of the blocks predicted cached, and the rank's clock. */
export interface RecencyProfile {
  /** Per predicted block i, the rank's touches since the least recently touched of blocks 0..i was last touched. */
  readonly needs: Uint32Array;
  /** The rank's clock right after the prompt was recorded. */
  readonly clock: number;
  /**
   * Blocks the rank's running requests held when this one was routed. A missing block routed there more recently
   * than that may belong to a request the engine had not prefilled yet: its miss says nothing about the cache size.
   */
  readonly inflightBlocks: number;
}

/** Right after `index.recordRoute` of a prompt to `slot`, of which `predictedBlocks` were predicted cached. */
export function recencyProfile(index: KvIndex, slot: number, predictedBlocks: number, inflightBlocks: number): RecencyProfile {
  return { needs: index.lastRecordNeeds(predictedBlocks), clock: index.slotClockOf(slot), inflightBlocks };
}

/**
 * The most blocks the engine's cache can hold, in blocks routed to its rank, given that it reported `reportedTokens`
 * cached; undefined when the answer bounds nothing (it had more than half the predicted blocks, or the missing one was never
 * held or may not have been prefilled yet). `clockNow` is the rank's clock now: blocks routed since also count, as the engine
 * may have evicted the block while this request waited.
 */
export function missBound(p: RecencyProfile, reportedTokens: number, blockSize: number, clockNow: number): number | undefined {
  const missing = Math.floor(reportedTokens / blockSize);
  // Only a miss (at most half the prediction): a prompt a block or two short is how engines count a fully cached
  // prompt's last block, or a block the request's own neighbour had not finished, not an eviction.
  if (2 * missing > p.needs.length) return undefined;
  const need = p.needs[missing]!;
  if (need === NEED_NEVER || need <= p.inflightBlocks) return undefined;
  return need + ((clockNow - p.clock) >>> 0);
}
