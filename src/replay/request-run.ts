/**
 * @module Sends a replay's requests at their times and collects what comes back — records, inter-token gaps, progress
 * — the same way whether they go to the replay's own gateway (policy-run.ts) or to running ones (gateway-run.ts).
 */
import type { CompletionRecord } from "./completion-client.ts";
import type { ReplayRequest } from "./replay-request.ts";
import { runSchedule, type ScheduleClock, type ScheduleReport } from "./schedule.ts";

export interface RunProgress {
  sent: number;
  done: number;
  errors: number;
  total: number;
}

export interface RequestRunOptions {
  requests: readonly ReplayRequest[];
  /** Trace ms per clock ms. */
  divisor: number;
  clock: ScheduleClock;
  /** Sends one request; every inter-token gap it sees goes to `onGap`. */
  send(req: ReplayRequest, onGap: (ms: number) => void): Promise<CompletionRecord>;
  /** Just before a request is sent. */
  beforeSend?(req: ReplayRequest): void;
  /** Just after, with how many have been sent so far. */
  afterSend?(sent: number, total: number): void;
  onProgress?(p: RunProgress): void;
}

/** Resolves once every request has answered, with the records in the order they were sent. */
export async function runRequests(o: RequestRunOptions): Promise<{ records: CompletionRecord[]; gaps: Float64Array; schedule: ScheduleReport }> {
  const records: CompletionRecord[] = [];
  const gaps: number[] = [];
  const pending: Promise<void>[] = [];
  let errors = 0;
  const total = o.requests.length;
  const progress = (): void => o.onProgress?.({ sent: pending.length, done: records.length, errors, total });
  const schedule = await runSchedule(o.requests, {
    divisor: o.divisor, clock: o.clock,
    send: (req) => {
      o.beforeSend?.(req);
      pending.push(o.send(req, (g) => gaps.push(g)).then((rec) => {
        records.push(rec);
        if (rec.error) errors++;
        progress();
      }));
      o.afterSend?.(pending.length, total);
      progress();
    },
  });
  await Promise.all(pending);
  records.sort((a, b) => a.sentAt - b.sentAt || a.index - b.index);
  return { records, gaps: Float64Array.from(gaps), schedule };
}
