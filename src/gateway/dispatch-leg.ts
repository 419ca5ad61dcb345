/**
 * @module One leg of a request — route, then send, until a worker answers (a leaf below both dispatch paths, so the
 * aggregated and the disaggregated one share it): a worker that refuses the connection, times out or answers
 * 408/429/5xx before any output is booked off (`handle.fail()`), excluded for this request, and the next best one
 * is tried while the budget lasts. A request pinned to a worker (`kvgate.worker_id`) is not moved.
 */
import { KvgateError, isKvgateError } from "../core/errors.ts";
import { queueRejectedError, type DecisionRecord, type RequestHandle, type RouteOverrides, type RouteSignals, type WorkerRole, type WorkerTarget } from "../routing/index.ts";
import type { Exchange, GatewayState } from "./gateway-state.ts";
import { retryableStatus, sendUpstream, UpstreamFailure, type Attempt } from "./upstream.ts";
import { markRouted } from "./usage-feedback.ts";

export interface Dispatched {
  attempt: Attempt;
  handle: RequestHandle;
  signals: RouteSignals;
  /** More response headers about the decision (disaggregated serving: where the prompt was prefilled). */
  headers?: Record<string, string>;
  /**
   * The prompt's KV reached this worker by transfer from a prefill worker: its usage counts those tokens cached, which
   * says nothing about routing, so the prefill leg's usage is the actual hit recorded instead.
   */
  kvTransferred?: boolean;
  /** The decision's candidates table, when the client asked to explain it. */
  decision?: DecisionRecord;
}

/** How one leg of a request is routed and sent; disaggregated serving sends two legs per request. */
export interface Leg {
  requestId: string;
  phase?: WorkerRole;
  overrides?: RouteOverrides;
  target?: WorkerTarget;
  sessionId?: string;
  /** Aborts routing and the attempt: the client's signal, or one that also stops when a sibling leg fails. */
  signal: AbortSignal;
  /** False: throw the first failure instead of trying another worker (the caller retries the legs together). */
  retry?: boolean;
  /** The prompt's KV arrives by transfer, so its prefill never loads the chosen worker. */
  prefilled?: boolean;
  /** Headers for the worker (default the exchange's). */
  headers?: Headers;
}

/** The leg of an ordinary (aggregated) request: the client's own routing choices. */
export function requestLeg(ex: Exchange): Leg {
  return { requestId: ex.requestId, overrides: ex.ext.overrides, target: ex.ext.target, sessionId: ex.sessionId, signal: ex.signal };
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

/** One leg of a request: route it as `leg` says, send `bodyText`, retry on other workers unless told not to. */
export async function dispatchLeg(gw: GatewayState, ex: Exchange, tokens: Uint32Array, bodyText: string, budget: Budget, leg: Leg): Promise<Dispatched> {
  const cfg = gw.config.upstream;
  let last: { failure: UpstreamFailure; worker: string } | undefined;
  for (;;) {
    const exclude = ex.ext.exclude ? [...ex.ext.exclude, ...ex.excluded] : ex.excluded;
    let outcome;
    const routeStart = ex.trace.now();
    try {
      outcome = await gw.router.route({
        requestId: leg.requestId, tokens, model: ex.model, lora: ex.adapter, namespace: ex.namespace, phase: leg.phase, sessionId: leg.sessionId, signal: leg.signal, exclude,
        overrides: leg.overrides, priority: ex.ext.priority, target: leg.target, maxTokens: leg.phase === "prefill" ? 1 : ex.maxTokens,
        explain: ex.explain || undefined,
      });
    } catch (e) {
      // Every worker left was excluded by this request's failures: report the failure, not the empty fleet.
      if (last && isKvgateError(e) && e.code === "KVGATE_ERR_NO_WORKERS") throw last.failure.toKvgateError(last.worker);
      throw e;
    }
    if (outcome.kind === "queue_rejected") throw queueRejectedError(outcome.rejection);
    if (outcome.kind !== "routed") throw new KvgateError("KVGATE_ERR_STATE", "routing answered a query for a dispatch");
    const { handle, signals } = outcome;
    ex.trace.routed(signals, routeStart);
    markRouted(gw, signals);
    if (leg.prefilled) handle.firstToken();
    // One prediction per request: a disaggregated request's is its prefill leg's (recorded by routePrefill).
    if (!leg.prefilled) gw.metrics.routed(signals, ex.tokenizeMs, ex);
    let failure: UpstreamFailure;
    try {
      const url = signals.endpoint + ex.path;
      const attempt = await sendUpstream(gw.fetch, url, ex.trace.dispatchStart(signals, url, leg.headers ?? ex.headers), bodyText, leg.signal, cfg.headersTimeoutMs);
      const status = attempt.res.status;
      ex.trace.dispatchEnd(status, retryableStatus(status) ? `worker answered ${status}` : undefined);
      if (attempt.res.ok || !retryableStatus(status)) {
        gw.health.attemptSucceeded(signals.worker);
        return { attempt, handle, signals, kvTransferred: leg.prefilled, decision: ex.explain ? outcome.decision : undefined };
      }
      const text = await attempt.res.text().catch(() => "");
      failure = new UpstreamFailure("status", `answered ${status}${text ? `: ${upstreamMessage(text)}` : ""}`, status);
    } catch (e) {
      ex.trace.dispatchEnd(undefined, (e as Error)?.message ?? String(e));
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
    if (leg.target || leg.retry === false || ex[budget] <= 0) throw failure.toKvgateError(signals.worker);
    ex[budget]--;
    ex.excluded.push(signals.worker);
    gw.metrics.retries.inc({ reason: failure.kind });
  }
}
