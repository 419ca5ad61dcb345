/** @module Ordering keys of the admission queue: the entry with the highest key is admitted first (ties: earliest arrival). */
import type { QueuePolicy } from "./router-config.ts";

export interface QueueKeyInput {
  /** Seconds since the queue was created, at arrival. */
  arrivalSec: number;
  /** Request priority: seconds of queue jump for FCFS/LCFS, a weight boost for WSPT. */
  priority: number;
  /** Prompt tokens not cached on the best eligible worker (the work this request adds). */
  uncachedTokens: number;
}

/**
 * fcfs: earlier arrival first; a positive priority acts as if the request had arrived that many seconds earlier.
 * lcfs: later arrival first (newest work is most likely to still be wanted); priority shifts the same way.
 * wspt: weighted shortest processing time — (1 + priority) / uncached work, so short or mostly cached prompts go first.
 */
export function queueKey(policy: QueuePolicy, k: QueueKeyInput): number {
  switch (policy) {
    case "fcfs": return Math.max(k.priority, 0) - k.arrivalSec;
    case "lcfs": return k.priority + k.arrivalSec;
    case "wspt": return (1 + k.priority) / Math.max(1, k.uncachedTokens);
  }
}
