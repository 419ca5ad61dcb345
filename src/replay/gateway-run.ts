/**
 * @module Replays one arrival schedule through already-running gateways (`kvgate replay --gateway`) instead of a router
 * the replay starts itself: the same streaming client and records, spread round-robin over the gateways, each record
 * naming the gateway that served it. The fleet behind them is theirs: nothing is started, sampled or torn down here.
 */
import { sendCompletion, type CompletionRecord } from "./completion-client.ts";
import { GatewayFront } from "./gateway-front.ts";
import type { PolicyRun } from "./policy-run.ts";
import type { ReplayHost } from "./replay-host.ts";
import type { ReplayPolicy } from "./replay-policies.ts";
import type { ReplayRequest } from "./replay-request.ts";
import { runRequests } from "./request-run.ts";
import { engineClock } from "./schedule.ts";
import { promptTokens } from "./synthetic-tokens.ts";

export interface GatewayRunInput {
  /** What the gateways run (labels the result; the replay cannot set it). */
  policy: ReplayPolicy;
  gateways: readonly string[];
  requests: readonly ReplayRequest[];
  model: string;
  traceSpeedup: number;
  /** The engines' speed-up over wall time, when known (simulated fleets); reported times are wall × this. */
  engineSpeedup: number;
  /** Wall ms a gateway that refused a connection is skipped. */
  downForMs?: number;
  /** Request ids start with this (default `gw`), so runs against one fleet stay apart in its logs. */
  idPrefix?: string;
  host: Pick<ReplayHost, "wall" | "fetch">;
  onProgress?(p: { sent: number; done: number; errors: number; total: number }): void;
  /** Told as each request is sent (its index, clock ms since the run started): benches act mid-run on it. */
  onSent?(index: number, sentAt: number): void;
}

/** The run plus the front's refusal counts per gateway. */
export interface GatewayRun extends PolicyRun {
  refused: number[];
}

export async function runThroughGateways(input: GatewayRunInput): Promise<GatewayRun> {
  const clock = engineClock(input.host.wall, input.engineSpeedup);
  const front = new GatewayFront({ urls: input.gateways, now: () => input.host.wall.now(), downForMs: input.downForMs ?? 1_000 });
  const runStart = clock.now();
  const prefix = input.idPrefix ?? "gw";

  /** Sends on the next gateway; a refused connection moves the request to the next one (each gateway tried once). */
  const send = async (req: ReplayRequest, onGap: (ms: number) => void): Promise<CompletionRecord> => {
    const first = clock.now();
    let rec: CompletionRecord | undefined;
    for (let attempt = 0; attempt < front.urls.length; attempt++) {
      const g = front.pick();
      const started = clock.now();
      rec = await sendCompletion({
        url: front.urls[g]!, model: input.model, index: req.index, requestId: `${prefix}-${req.index}`, tokens: promptTokens(req),
        maxTokens: Math.max(1, req.outputLength), now: clock.now, runStart, fetch: input.host.fetch, onGap,
      });
      rec.gateway = front.urls[g]!;
      // Times count from the first attempt: the client waited through the refusals too.
      const lost = started - first;
      rec.sentAt = first - runStart;
      if (rec.ttftMs !== undefined) rec.ttftMs += lost;
      if (rec.e2eMs !== undefined) rec.e2eMs += lost;
      if (!rec.refused) break;
      front.refusedBy(g);
    }
    return rec!;
  };

  const { records, gaps, schedule } = await runRequests({
    requests: input.requests, divisor: input.traceSpeedup, clock, onProgress: input.onProgress, send,
    beforeSend: (req) => input.onSent?.(req.index, clock.now() - runStart),
  });
  const workers = [...new Set(records.map((r) => r.worker).filter((w): w is string => !!w))].sort();
  const log = front.urls.flatMap((u, i) => (front.refused[i]! > 0 ? [`gateway ${u} refused ${front.refused[i]} connections (those requests went to the next gateway)`] : []));
  return { policy: input.policy, workers, records, gaps, load: [], schedule, log, refused: front.refused };
}
