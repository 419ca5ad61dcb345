/**
 * @module POST /v1/chat/completions and /v1/completions: read and check the body, tokenize the prompt, route and
 * dispatch it, then stream (SseRelay) or return the worker's answer. The worker validates everything kvgate does
 * not need for routing; its 4xx answers pass through unchanged.
 */
import type { Context } from "hono";
import { KvgateError } from "../core/errors.ts";
import { servesDisaggregated } from "./disagg-decide.ts";
import type { Dispatched } from "./dispatch-leg.ts";
import { dispatch } from "./dispatch.ts";
import { decisionHeaders, prepareExchange } from "./exchange.ts";
import type { Exchange, GatewayState } from "./gateway-state.ts";
import { readJsonObjectText } from "../core/json-body.ts";
import type { Endpoint } from "./prompt-tokens.ts";
import { previewBody } from "./route-preview.ts";
import { hedgedDispatch } from "./hedged-dispatch.ts";
import { SseRelay } from "./sse-relay.ts";
import { hasBody } from "./direct-source.ts";
import { clientHeaders, readAll, UpstreamFailure } from "./upstream.ts";
import { explainHeaders, explainTable } from "./explain.ts";
import { RequestTrace } from "./request-trace.ts";
import { recordUsage } from "./usage-feedback.ts";

function respond(body: BodyInit | null, upstream: Response, extra: Record<string, string>): Response {
  const headers = clientHeaders(upstream.headers);
  for (const [k, v] of Object.entries(extra)) headers.set(k, v);
  return new Response(body, { status: upstream.status, headers });
}

/** The decision headers of a dispatch, with the disaggregation ones when there are, and the explain table when asked. */
async function headersOf(d: Dispatched, requestId: string): Promise<Record<string, string>> {
  const h = d.headers ? { ...decisionHeaders(d.signals, requestId), ...d.headers } : decisionHeaders(d.signals, requestId);
  return d.decision ? { ...h, ...(await explainHeaders(d.decision)) } : h;
}

async function passThrough(gw: GatewayState, d: Dispatched, requestId: string): Promise<Response> {
  const bytes = await d.attempt.res.arrayBuffer().catch(() => new ArrayBuffer(0));
  d.handle.fail();
  return respond(bytes, d.attempt.res, await headersOf(d, requestId));
}

/** A whole (non-streamed) answer: nothing reaches the client before it is complete, so any failure is retried. */
async function whole(gw: GatewayState, ex: Exchange, first: Dispatched): Promise<Response> {
  let d = first;
  for (;;) {
    if (!d.attempt.res.ok) return passThrough(gw, d, ex.requestId);
    try {
      const bytes = await readAll(d.attempt.res, gw.config.upstream.idleTimeoutMs);
      ex.trace.streamEnd();
      d.handle.firstToken();
      d.handle.finish();
      try {
        if (!d.kvTransferred) recordUsage(gw, d.signals, (JSON.parse(new TextDecoder().decode(bytes)) as { usage?: unknown }).usage, ex);
      } catch {
        // not JSON: nothing to learn from it
      }
      gw.metrics.duration.observe({ endpoint: ex.endpoint }, (gw.fineNow() - ex.arrivedAt) / 1000);
      return respond(bytes as Uint8Array<ArrayBuffer>, d.attempt.res, await headersOf(d, ex.requestId));
    } catch (e) {
      if (ex.signal.aborted) {
        d.handle.cancel();
        gw.metrics.cancellations.inc();
        throw new KvgateError("KVGATE_ERR_CANCELLED", "the client went away");
      }
      const f = e instanceof UpstreamFailure ? e : new UpstreamFailure("stream", String((e as Error)?.message ?? e));
      const worker = d.signals.worker;
      d.handle.fail();
      gw.metrics.upstreamFailures.inc({ kind: f.kind });
      if (f.kind === "stream") gw.health.connectFailed(worker);
      if (ex.ext.target || ex.retriesLeft <= 0) throw f.toKvgateError(worker);
      ex.retriesLeft--;
      ex.excluded.push(worker);
      gw.metrics.retries.inc({ reason: f.kind });
      d = await dispatch(gw, ex, ex.tokens, ex.bodyText, "retriesLeft");
    }
  }
}

export function completionHandler(gw: GatewayState, endpoint: Endpoint) {
  return async function completions(c: Context): Promise<Response> {
    const trace = gw.tracing.tracer ? new RequestTrace(gw.tracing.tracer, c.req.raw.headers, { "http.request.method": "POST", "url.path": c.req.path }) : undefined;
    if (!trace) return answer(c, undefined);
    try {
      const res = await answer(c, trace);
      // A relayed stream ends its span when the stream ends; everything else has ended here.
      if (!res.headers.get("content-type")?.startsWith("text/event-stream")) trace.end(res.status);
      return res;
    } catch (e) {
      trace.end((e as { status?: number }).status ?? 500, (e as Error)?.message);
      throw e;
    }
  };

  async function answer(c: Context, trace: RequestTrace | undefined): Promise<Response> {
    const { value, text } = await readJsonObjectText(c.req.raw);
    const ex = await prepareExchange(gw, c, endpoint, value, text, trace);
    if (ex.ext.queryOnly) {
      const phase = servesDisaggregated(gw, ex.model) ? "decode" : undefined;
      const { signals, decision } = await gw.router.queryDecision({ requestId: ex.requestId, tokens: ex.tokens, model: ex.model, lora: ex.adapter, namespace: ex.namespace, phase, sessionId: ex.sessionId, exclude: ex.ext.exclude, overrides: ex.ext.overrides, target: ex.ext.target, explain: ex.explain || undefined });
      return c.json(decision ? { ...previewBody(signals, ex), explain: explainTable(decision) } : previewBody(signals, ex));
    }
    const first = ex.stream && gw.hedge.enabled ? await hedgedDispatch(gw, ex, gw.hedge) : await dispatch(gw, ex, ex.tokens, ex.bodyText, "retriesLeft");
    const res = first.attempt.res;
    if (!res.ok) return passThrough(gw, first, ex.requestId);
    if (ex.stream && hasBody(res) && (res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
      return new SseRelay(gw, ex, first).response(await headersOf(first, ex.requestId));
    }
    return whole(gw, ex, first);
  }
}
