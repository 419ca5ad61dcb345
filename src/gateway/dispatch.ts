/**
 * @module Route, then send, until a worker answers: a worker that refuses the connection, times out or answers
 * 408/429/5xx before any output is booked off (`handle.fail()`), excluded for this request, and the next best one
 * is tried while the budget lasts. A request pinned to a worker (`kvgate.worker_id`) is not moved.
 */
import { KvgateError, isKvgateError } from "../core/errors.ts";
import { queueRejectedError, type RequestHandle, type RouteSignals } from "../routing/index.ts";
import type { Exchange, GatewayState } from "./gateway-state.ts";
import { retryableStatus, sendUpstream, UpstreamFailure, type Attempt } from "./upstream.ts";

export interface Dispatched {
  attempt: Attempt;
  handle: RequestHandle;
  signals: RouteSignals;
}

export type Budget = "retriesLeft" | "migrationsLeft";

/** The error message inside an upstream OpenAI error body, for the message kvgate passes on. */
function upstreamMessage(text: string): string {
  try {
    const m = (JSON.parse(text) as { error?: { message?: unknown }; message?: unknown })?.error?.message;
    if (typeof m === "string") return m.slice(0, 300);
  } catch {
    // not JSON: fall through
  }
  return text.slice(0, 300);
}

/**
 * Books a worker and sends `bodyText` to it. Resolves with the first attempt that got response headers and is
 * not worth retrying (a 2xx, or a 4xx the client must see); rejects with a KvgateError otherwise (429 queue,
 * 503 no worker, 502/504 when the last worker failed, 499 when the client left).
 */
export async function dispatch(gw: GatewayState, ex: Exchange, tokens: Uint32Array, bodyText: string, budget: Budget): Promise<Dispatched> {
  const cfg = gw.config.upstream;
  let last: { failure: UpstreamFailure; worker: string } | undefined;
  for (;;) {
    const exclude = ex.ext.exclude ? [...ex.ext.exclude, ...ex.excluded] : ex.excluded;
    let outcome;
    try {
      outcome = await gw.router.route({
        requestId: ex.requestId, tokens, model: ex.model, sessionId: ex.sessionId, signal: ex.signal, exclude,
        overrides: ex.ext.overrides, priority: ex.ext.priority, target: ex.ext.target,
      });
    } catch (e) {
      // Every worker left was excluded by this request's failures: report the failure, not the empty fleet.
      if (last && isKvgateError(e) && e.code === "KVGATE_ERR_NO_WORKERS") throw last.failure.toKvgateError(last.worker);
      throw e;
    }
    if (outcome.kind === "queue_rejected") throw queueRejectedError(outcome.rejection);
    if (outcome.kind !== "routed") throw new KvgateError("KVGATE_ERR_STATE", "routing answered a query for a dispatch");
    const { handle, signals } = outcome;
    gw.metrics.routed(signals, ex.tokenizeMs);
    let failure: UpstreamFailure;
    try {
      const attempt = await sendUpstream(gw.fetch, signals.endpoint + ex.path, ex.headers, bodyText, ex.signal, cfg.headersTimeoutMs);
      const status = attempt.res.status;
      if (attempt.res.ok || !retryableStatus(status)) {
        gw.health.attemptSucceeded(signals.worker);
        return { attempt, handle, signals };
      }
      const text = await attempt.res.text().catch(() => "");
      failure = new UpstreamFailure("status", `answered ${status}${text ? `: ${upstreamMessage(text)}` : ""}`, status);
    } catch (e) {
      if (!(e instanceof UpstreamFailure)) {
        handle.cancel();
        throw e;
      }
      failure = e;
    }
    handle.fail();
    gw.metrics.upstreamFailures.inc({ kind: failure.kind });
    gw.health.attemptFailed(signals.worker, failure.kind, failure.status);
    gw.log("warn", `request ${ex.requestId}: worker ${signals.worker} ${failure.message}`);
    last = { failure, worker: signals.worker };
    if (ex.ext.target || ex[budget] <= 0) throw failure.toKvgateError(signals.worker);
    ex[budget]--;
    ex.excluded.push(signals.worker);
    gw.metrics.retries.inc({ reason: failure.kind });
  }
}
