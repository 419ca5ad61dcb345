/**
 * @module How far each policy recovers from the replay's faults: its fault run set against a run of the same policy,
 * requests and seed without them, over the whole run and over the requests sent after the first fault struck.
 */
import type { CompletionRecord } from "./completion-client.ts";
import type { ReplayFault } from "./replay-faults.ts";
import { summarize } from "./stats.ts";

export interface RunFigures {
  hitRate: number;
  /** Hit rate over the requests from `FaultRecovery.from` on. */
  hitRateAfter: number;
  ttftMeanMs: number;
  ttftP99Ms: number;
  errors: number;
}

export interface FaultRecovery {
  /** Index of the first request sent after the first fault struck (0 when a fault holds from the start). */
  from: number;
  /** The same policy without the faults. */
  clean: RunFigures;
  faulted: RunFigures;
  /** Fault-run hit rate after the fault over the clean run's on the same requests (1 = fully recovered). */
  shareAfter: number;
  /** The same over the whole run. */
  share: number;
}

/**
 * The first request index a fault affects: a mid-run fault fires once `at` × total requests were sent (FaultSchedule),
 * a smaller engine cache holds from the start. Undefined when there are no faults.
 */
export function firstFaultedRequest(faults: readonly ReplayFault[], total: number): number | undefined {
  if (faults.length === 0) return undefined;
  return Math.min(...faults.map((f) => ("at" in f ? Math.min(total, Math.ceil(f.at * total)) : 0)));
}

function figures(records: readonly CompletionRecord[], from: number): RunFigures {
  const all = summarize(records, []);
  return {
    hitRate: all.hitRate, hitRateAfter: summarize(records.filter((r) => r.index >= from), []).hitRate,
    ttftMeanMs: all.ttftMs.mean, ttftP99Ms: all.ttftMs.p99, errors: all.errors,
  };
}

export function faultRecovery(clean: readonly CompletionRecord[], faulted: readonly CompletionRecord[], from: number): FaultRecovery {
  const c = figures(clean, from), f = figures(faulted, from);
  return { from, clean: c, faulted: f, shareAfter: c.hitRateAfter > 0 ? f.hitRateAfter / c.hitRateAfter : NaN, share: c.hitRate > 0 ? f.hitRate / c.hitRate : NaN };
}
