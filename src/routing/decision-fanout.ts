/** @module One DecisionSink over several (the gateway's ring and its decision log), asking for the most any of them wants. */
import type { DecisionRecord, DecisionSink } from "./decision-record.ts";

/** undefined for no sinks, so the router copies nothing. */
export function fanOutDecisions(sinks: readonly (DecisionSink | undefined)[]): DecisionSink | undefined {
  const live = sinks.filter((s): s is DecisionSink => s !== undefined);
  if (live.length <= 1) return live[0];
  const inputs = live.some((s) => s.detail === "inputs");
  return {
    detail: inputs ? "inputs" : "candidates",
    tokens: live.some((s) => s.detail === "inputs" && s.tokens === true),
    decided(record: DecisionRecord): void {
      for (const s of live) s.decided(record);
    },
  };
}
