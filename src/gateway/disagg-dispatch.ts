/**
 * @module Disaggregated dispatch in the vLLM and SGLang flows (docs/disaggregation.md), standing in for dispatch() so
 * streaming, retries, migration and client aborts work unchanged on the decode leg.
 */
import { KvgateError, isKvgateError } from "../core/errors.ts";
import { decidePrefill, legTargets, type Decision } from "./disagg-decide.ts";
import { routePrefill, runPrefill, type PrefillOutcome } from "./disagg-prefill.ts";
import { dispatchLeg, requestLeg, type Budget, type Dispatched } from "./dispatch-leg.ts";
import type { Exchange, GatewayState } from "./gateway-state.ts";

/** SGLang's default bootstrap port, for prefill workers configured without bootstrap_port. */
export const DEFAULT_BOOTSTRAP_PORT = 8998;

const ASK_REMOTE_DECODE = { do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null };

/** The vLLM prefill request: one token, whole answer, asking the engine to keep the KV for a remote decode. */
export function vllmPrefillBody(body: Record<string, unknown>): Record<string, unknown> {
  const b: Record<string, unknown> = { ...body, max_tokens: 1, stream: false, kv_transfer_params: ASK_REMOTE_DECODE };
  if (b.max_completion_tokens !== undefined && b.max_completion_tokens !== null) b.max_completion_tokens = 1;
  for (const k of ["stream_options", "min_tokens", "min_completion_tokens"]) delete b[k];
  return b;
}

/** A uniform random room in [0, 2^63), as SGLang's routers draw it. */
export function randomRoom(): bigint {
  const r = new BigUint64Array(1);
  crypto.getRandomValues(r);
  return r[0]! & ((1n << 63n) - 1n);
}

/** `body` as JSON with the bootstrap fields; the room is written as an integer literal (it does not fit a double). */
export function withBootstrap(body: Record<string, unknown>, host: string, port: number, room: bigint): string {
  const b: Record<string, unknown> = { ...body, bootstrap_host: host, bootstrap_port: port };
  delete b.bootstrap_room;
  const text = JSON.stringify(b);
  return `${text.slice(0, -1)},"bootstrap_room":${room.toString()}}`;
}

function retryHeaders(h: Headers, attempt: number): Headers {
  const out = new Headers(h);
  out.set("x-request-id", `${h.get("x-request-id") ?? "kvgate"}-retry${attempt}`);
  return out;
}

function bodyOf(ex: Exchange, bodyText: string): Record<string, unknown> {
  return bodyText === ex.bodyText ? ex.body : (JSON.parse(bodyText) as Record<string, unknown>);
}

function decisionHeaders(d: Decision, prefillWorker: string | undefined): Record<string, string> {
  const h: Record<string, string> = { "x-kvgate-prefill": d.where, "x-kvgate-prefill-reason": d.reason };
  if (prefillWorker) h["x-kvgate-prefill-worker"] = prefillWorker;
  return h;
}

export function dispatchDisaggregated(gw: GatewayState, ex: Exchange, tokens: Uint32Array, bodyText: string, budget: Budget): Promise<Dispatched> {
  const body = bodyOf(ex, bodyText);
  return gw.config.disagg.flow === "sglang" ? sglangFlow(gw, ex, tokens, body, budget) : vllmFlow(gw, ex, tokens, body, bodyText, budget);
}

function transferParams(json: Record<string, unknown>): string | undefined {
  const p = json.kv_transfer_params;
  return p !== null && typeof p === "object" && !Array.isArray(p) ? undefined : "its answer has no kv_transfer_params (is it a KV producer?)";
}

async function vllmFlow(gw: GatewayState, ex: Exchange, tokens: Uint32Array, body: Record<string, unknown>, bodyText: string, budget: Budget): Promise<Dispatched> {
  const targets = legTargets(gw, ex);
  let decision = await decidePrefill(gw, ex, tokens, targets);
  let params: unknown;
  let prefillWorker: string | undefined;
  if (decision.where === "remote") {
    const route = await routePrefill(gw, ex, tokens, targets.prefill, ex.signal);
    if (route.kind === "unavailable") {
      decision = { where: "local", reason: route.reason };
    } else {
      const out = await runPrefill(gw, ex, route, JSON.stringify(vllmPrefillBody(body)), ex.signal, transferParams);
      if (out.kind === "refused") return { ...out.dispatched, headers: decisionHeaders(decision, route.signals.worker) };
      if (out.kind === "failed") {
        if (targets.prefill) throw out.error;
        ex.excluded.push(out.worker);
        decision = { where: "local", reason: "prefill_failed" };
      } else {
        params = out.json.kv_transfer_params;
        prefillWorker = out.worker;
      }
    }
  }
  gw.metrics.disaggPrefill.inc({ flow: "vllm", prefill: decision.where, reason: decision.reason });
  const remote = decision.where === "remote";
  const started = gw.fineNow();
  const d = await dispatchLeg(gw, ex, tokens, remote ? JSON.stringify({ ...body, kv_transfer_params: params }) : bodyText, budget, {
    ...requestLeg(ex), phase: "decode", target: targets.decode, prefilled: remote,
    // With the KV arriving by transfer only load matters; a local prefill is KV-aware over the decode pool.
    overrides: remote ? { ...ex.ext.overrides, overlapWeight: 0 } : ex.ext.overrides,
  });
  gw.metrics.disaggLeg.observe({ leg: "decode_start" }, (gw.fineNow() - started) / 1000);
  return { ...d, headers: decisionHeaders(decision, prefillWorker) };
}

async function sglangFlow(gw: GatewayState, ex: Exchange, tokens: Uint32Array, body: Record<string, unknown>, budget: Budget): Promise<Dispatched> {
  const targets = legTargets(gw, ex);
  const prefillBody: Record<string, unknown> = { ...body, stream: false };
  delete prefillBody.stream_options;
  let last: KvgateError | undefined;
  for (let attempt = 0; ; attempt++) {
    // A retried pair may land on an engine still aborting the previous attempt: give it a request id of its own.
    const headers = attempt === 0 ? ex.headers : retryHeaders(ex.headers, attempt);
    const route = await routePrefill(gw, ex, tokens, targets.prefill, ex.signal);
    // Every prefill worker left failed this request already: report that failure, not the empty pool.
    if (route.kind === "unavailable") throw last && route.reason === "no_prefill_workers" ? last : route.error;
    const pw = gw.fleet.get(route.signals.worker);
    const host = new URL(route.signals.endpoint).hostname.replace(/^\[|\]$/g, "");
    const port = pw?.bootstrapPort ?? DEFAULT_BOOTSTRAP_PORT;
    const room = randomRoom();
    // One signal for both legs: the client leaving, or one leg failing before the decode answered, stops both.
    const pair = new AbortController();
    const onClient = (): void => pair.abort();
    ex.signal.addEventListener("abort", onClient, { once: true });
    let decodeAnswered = false;
    let prefillError: KvgateError | undefined;
    let prefillRefused: Dispatched | undefined;
    const prefill: Promise<PrefillOutcome | undefined> = runPrefill(gw, ex, route, withBootstrap(prefillBody, host, port, room), pair.signal, undefined, headers).then(async (out) => {
      if (out.kind === "refused") {
        // The request itself is wrong (4xx): the client gets the prefill's answer, read now before the pair is stopped.
        const res = out.dispatched.attempt.res;
        const text = await res.text().catch(() => "");
        if (!decodeAnswered && !pair.signal.aborted) {
          prefillRefused = { ...out.dispatched, attempt: { ...out.dispatched.attempt, res: new Response(text, { status: res.status, headers: res.headers }) } };
          pair.abort();
        } else {
          out.dispatched.handle.fail();
        }
        return out;
      }
      if (out.kind === "failed" && !decodeAnswered && !pair.signal.aborted) {
        prefillError = out.error;
        pair.abort();
      } else if (out.kind === "failed" && decodeAnswered) {
        gw.log("warn", `request ${ex.requestId}: ${out.error.message} after the decode started`);
      }
      return out;
    }, () => undefined).catch(() => undefined);
    const decision: Decision = { where: "remote", reason: targets.prefill ? "target" : "unconditional" };
    gw.metrics.disaggPrefill.inc({ flow: "sglang", prefill: "remote", reason: decision.reason });
    const started = gw.fineNow();
    try {
      const d = await dispatchLeg(gw, ex, tokens, withBootstrap(body, host, port, room), budget, {
        ...requestLeg(ex), phase: "decode", target: targets.decode, prefilled: true, retry: false, signal: pair.signal, headers,
        overrides: { ...ex.ext.overrides, overlapWeight: 0 },
      });
      decodeAnswered = true;
      // The decode refused the request (4xx): its room will never be read, so stop the prefill.
      if (!d.attempt.res.ok) pair.abort();
      gw.metrics.disaggLeg.observe({ leg: "decode_start" }, (gw.fineNow() - started) / 1000);
      return { ...d, headers: decisionHeaders(decision, route.signals.worker) };
    } catch (e) {
      pair.abort();
      ex.signal.removeEventListener("abort", onClient);
      await prefill;
      if (ex.signal.aborted) throw new KvgateError("KVGATE_ERR_CANCELLED", "the client went away");
      if (prefillRefused) return { ...prefillRefused, headers: decisionHeaders(decision, route.signals.worker) };
      const err = prefillError ?? e;
      if (last && isKvgateError(err) && err.code === "KVGATE_ERR_NO_WORKERS") throw last;
      if (!isKvgateError(err) || (err.code !== "KVGATE_ERR_UPSTREAM" && err.code !== "KVGATE_ERR_UPSTREAM_TIMEOUT")) throw err;
      const failed = prefillError ? route.signals.worker : (err.detail?.worker as string | undefined);
      if (!failed || targets.prefill || targets.decode || ex[budget] <= 0) throw err;
      ex[budget]--;
      ex.excluded.push(failed);
      last = err;
      gw.metrics.retries.inc({ reason: prefillError ? "prefill" : "decode" });
    }
  }
}
