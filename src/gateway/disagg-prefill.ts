/**
 * @module The prefill leg of a disaggregated request: routed KV-aware over the prefill pool under its own booking, which
 * ends exactly once (docs/disaggregation.md#bookings-cancellation-failures).
 */
import { KvgateError, isKvgateError } from "../core/errors.ts";
import { queueRejectedError, type RequestHandle, type RouteSignals, type WorkerTarget } from "../routing/index.ts";
import { excludedOf, type DisaggReason } from "./disagg-decide.ts";
import type { Dispatched } from "./dispatch-leg.ts";
import type { Exchange, GatewayState } from "./gateway-state.ts";
import { readAll, retryableStatus, sendUpstream, UpstreamFailure } from "./upstream.ts";
import { recordUsage } from "./usage-feedback.ts";

export type PrefillRoute =
  | { kind: "routed"; handle: RequestHandle; signals: RouteSignals }
  | { kind: "unavailable"; reason: DisaggReason; error: KvgateError };

export type PrefillOutcome =
  | { kind: "done"; worker: string; json: Record<string, unknown> }
  | { kind: "failed"; worker: string; error: KvgateError }
  /** The worker refused the request itself (a 4xx): the client gets that answer, as for any request. */
  | { kind: "refused"; dispatched: Dispatched };

let legSeq = 0;

/** Books a prefill worker for the request (KV-aware: the prompt's prefix decides, load breaks ties). */
export async function routePrefill(gw: GatewayState, ex: Exchange, tokens: Uint32Array, target: WorkerTarget | undefined, signal: AbortSignal): Promise<PrefillRoute> {
  try {
    const out = await gw.router.route({
      requestId: `${ex.requestId}/prefill-${(legSeq++).toString(36)}`, tokens, model: ex.model, lora: ex.adapter, namespace: ex.namespace, phase: "prefill", signal,
      exclude: excludedOf(ex), overrides: ex.ext.overrides, priority: ex.ext.priority, target,
      // The prefill leg produces one token: its booking expects no decode blocks from the client's max_tokens.
      maxTokens: 1,
    });
    if (out.kind === "queue_rejected") return { kind: "unavailable", reason: "prefill_busy", error: queueRejectedError(out.rejection) };
    if (out.kind !== "routed") throw new KvgateError("KVGATE_ERR_STATE", "routing answered a query for a prefill");
    gw.metrics.routed(out.signals, ex.tokenizeMs, ex);
    return { kind: "routed", handle: out.handle, signals: out.signals };
  } catch (e) {
    if (isKvgateError(e) && !target && e.code === "KVGATE_ERR_NO_WORKERS") return { kind: "unavailable", reason: "no_prefill_workers", error: e };
    if (isKvgateError(e) && !target && e.code === "KVGATE_ERR_ALL_WORKERS_BUSY") return { kind: "unavailable", reason: "prefill_busy", error: e };
    throw e;
  }
}

/**
 * Sends `bodyText` to the routed prefill worker and reads its whole answer. `check` names what a usable answer
 * lacks (e.g. kv_transfer_params), which then counts as the worker failing. Rejects only with the client's
 * cancellation (a 499 KvgateError); every worker problem is a "failed" outcome.
 */
export async function runPrefill(gw: GatewayState, ex: Exchange, leg: { handle: RequestHandle; signals: RouteSignals }, bodyText: string,
  signal: AbortSignal, check: (json: Record<string, unknown>) => string | undefined = () => undefined, headers = ex.headers): Promise<PrefillOutcome> {
  const { handle, signals } = leg;
  const worker = signals.worker;
  const started = gw.fineNow();
  const cfg = gw.config.upstream;
  let failure: UpstreamFailure;
  try {
    const attempt = await sendUpstream(gw.fetch, signals.endpoint + ex.path, headers, bodyText, signal, cfg.headersTimeoutMs);
    const res = attempt.res;
    if (!res.ok && !retryableStatus(res.status)) return { kind: "refused", dispatched: { attempt, handle, signals } };
    if (!res.ok) {
      const text = await res.text().catch(() => "");
      failure = new UpstreamFailure("status", `answered ${res.status}${text ? `: ${text.slice(0, 300)}` : ""}`, res.status);
    } else {
      const bytes = await readAll(res, cfg.idleTimeoutMs);
      let json: unknown;
      try {
        json = JSON.parse(new TextDecoder().decode(bytes));
      } catch {
        json = undefined;
      }
      const lack = json !== null && typeof json === "object" && !Array.isArray(json) ? check(json as Record<string, unknown>) : "its answer is not a JSON object";
      if (lack === undefined) {
        handle.firstToken();
        handle.finish();
        // What the prefill engine found cached is the request's actual hit (the decode counts transferred KV cached).
        recordUsage(gw, signals, (json as { usage?: unknown }).usage, ex);
        gw.metrics.disaggLeg.observe({ leg: "prefill" }, (gw.fineNow() - started) / 1000);
        return { kind: "done", worker, json: json as Record<string, unknown> };
      }
      failure = new UpstreamFailure("status", lack);
    }
  } catch (e) {
    if (signal.aborted || !(e instanceof UpstreamFailure)) {
      handle.cancel();
      if (ex.signal.aborted) throw new KvgateError("KVGATE_ERR_CANCELLED", "the client went away");
      // Stopped by the caller (the sibling leg failed): not this worker's fault.
      return { kind: "failed", worker, error: new KvgateError("KVGATE_ERR_CANCELLED", `prefill on ${worker} was stopped`) };
    }
    failure = e;
  }
  handle.fail();
  gw.metrics.upstreamFailures.inc({ kind: failure.kind });
  if (failure.kind === "connect" || failure.kind === "stream") gw.health.connectFailed(worker);
  gw.log("warn", `request ${ex.requestId}: prefill worker ${worker} ${failure.message}`);
  const base = failure.toKvgateError(worker);
  return { kind: "failed", worker, error: new KvgateError(base.code, `prefill ${base.message}`, base.detail) };
}
