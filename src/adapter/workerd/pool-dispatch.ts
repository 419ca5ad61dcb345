/**
 * @module A completion on Workers with a pool object: the decision is one call to the object (a committed route
 * plan), the Worker itself sends the request to the engine and holds its answer, so the object's single thread is
 * busy only for the decision and the reports. An engine that fails before answering is reported (cancel, with the
 * failure) and the request is decided again once without it.
 */
import { KvgateError, isKvgateError } from "../../core/errors.ts";
import { parseJsonObject } from "../../core/json-body.ts";
import type { GatewayConfig } from "../../gateway/config.ts";
import { checkBody, workerBody } from "../../gateway/exchange.ts";
import type { Endpoint } from "../../gateway/prompt-tokens.ts";
import { clientHeaders, readAll, retryableStatus, sendUpstream, UpstreamFailure, upstreamHeaders, type Attempt } from "../../gateway/upstream.ts";
import { parseRoutingExtension } from "../../routing/index.ts";
import type { ExecutionContext } from "./env-boot.ts";
import type { Decision, PoolClient, Report } from "./pool-client.ts";
import { relayStream } from "./pool-relay.ts";
import type { PoolLeases } from "./pool-leases.ts";
import { EXPLAIN_HEADER, explainHeaders } from "../../gateway/explain.ts";

/** Tells clients (and tests) the decision came from the pool object, not from this isolate. */
export const STATE_HEADER = { "x-kvgate-state": "durable-object" };

/** The decision call's body: the client's text with `"commit": true`, re-serialized only when it must change more. */
function decisionText(raw: Record<string, unknown>, text: string, excluded: string[]): string {
  if (excluded.length === 0 && !("commit" in raw)) return `{"commit":true,${text.slice(text.indexOf("{") + 1)}`;
  if (excluded.length === 0) return JSON.stringify({ ...raw, commit: true });
  const ext = (raw.kvgate ?? {}) as Record<string, unknown>;
  const exclude = [...((ext.exclude_workers as string[] | undefined) ?? []), ...excluded];
  return JSON.stringify({ ...raw, commit: true, kvgate: { ...ext, exclude_workers: exclude } });
}

function decisionHeaders(d: Decision, explain: Record<string, string>): Record<string, string> {
  return {
    ...STATE_HEADER, ...explain, "x-kvgate-request-id": d.request_id, "x-kvgate-worker": d.worker, "x-kvgate-dp-rank": String(d.dp_rank),
    "x-kvgate-overlap-blocks": `${d.overlap_blocks}/${d.prompt_blocks}`,
  };
}

function respond(body: BodyInit | null, upstream: Response, extra: Record<string, string>): Response {
  const headers = clientHeaders(upstream.headers);
  for (const [k, v] of Object.entries(extra)) headers.set(k, v);
  return new Response(body, { status: upstream.status, headers });
}

function failureJson(f: UpstreamFailure, retried: boolean): Record<string, unknown> {
  return { failure: { kind: f.kind, status: f.status, retried } };
}

/** A whole answer, read before anything reaches the client; its usage goes with the complete report. */
async function whole(attempt: Attempt, idleMs: number, report: (what: Report, body?: Record<string, unknown>) => void): Promise<Uint8Array> {
  const bytes = await readAll(attempt.res, idleMs);
  let usage: unknown;
  try {
    usage = (JSON.parse(new TextDecoder().decode(bytes)) as { usage?: unknown }).usage;
  } catch {
    // not JSON: nothing to learn from it
  }
  report("complete", usage && typeof usage === "object" ? { usage } : {});
  return bytes;
}

export async function poolCompletion(req: Request, endpoint: Endpoint, pool: PoolClient, cfg: GatewayConfig, ctx: ExecutionContext,
  leases: PoolLeases): Promise<Response> {
  const text = await req.text();
  const raw = parseJsonObject(text);
  checkBody(endpoint, raw);
  const ext = parseRoutingExtension(raw);
  // A query books nothing: the object's preview is the whole answer.
  if (ext.queryOnly) return pool.decide(text, req.headers);
  const { bodyText, stream, stripUsage } = workerBody(raw, text, cfg.upstream.streamUsage);
  const path = endpoint === "chat" ? "/v1/chat/completions" : "/v1/completions";
  const excluded: string[] = [];
  let retries = ext.target ? 0 : Math.min(1, cfg.upstream.retries);
  let last: KvgateError | undefined;
  for (;;) {
    const decided = await pool.decide(decisionText(raw, text, excluded), req.headers);
    if (!decided.ok) {
      // Every worker left was excluded by this request's failure: report the failure, not the empty fleet.
      if (last && decided.status === 503) throw last;
      return decided;
    }
    const d = (await decided.json()) as Decision;
    const report = pool.reporter(d.plan_id, ctx);
    const explain = await explainHeaders(d.explain);
    const upstream = upstreamHeaders(req.headers, d.request_id);
    // The explain request (and the admin token with it) is kvgate's, not the engine's.
    if (d.explain) {
      upstream.delete(EXPLAIN_HEADER);
      if (cfg.adminToken !== "") upstream.delete("authorization");
    }
    let failure: UpstreamFailure;
    try {
      const attempt = await sendUpstream(fetch, d.endpoint + path, upstream, bodyText, req.signal, cfg.upstream.headersTimeoutMs);
      const res = attempt.res;
      if (res.ok && stream && res.body && (res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
        return relayStream(attempt, req.signal, stripUsage, report, decisionHeaders(d, explain), d.expires_in_ms / 2,
          { leases, planId: d.plan_id });
      }
      if (res.ok) return respond(await whole(attempt, cfg.upstream.idleTimeoutMs, report) as Uint8Array<ArrayBuffer>, res, decisionHeaders(d, explain));
      if (!retryableStatus(res.status)) {
        // The worker judged the request (a 4xx the client must see): nothing was served, nothing failed.
        const bytes = await res.arrayBuffer().catch(() => new ArrayBuffer(0));
        report("cancel");
        return respond(bytes, res, decisionHeaders(d, explain));
      }
      const body = await res.text().catch(() => "");
      failure = new UpstreamFailure("status", `answered ${res.status}${body ? `: ${body.slice(0, 300)}` : ""}`, res.status);
    } catch (e) {
      if (req.signal.aborted) {
        report("cancel");
        throw new KvgateError("KVGATE_ERR_CANCELLED", "the client went away");
      }
      if (!(e instanceof UpstreamFailure)) {
        report("cancel");
        throw isKvgateError(e) ? e : new KvgateError("KVGATE_ERR_UPSTREAM", String((e as Error)?.message ?? e));
      }
      failure = e;
    }
    report("cancel", failureJson(failure, retries > 0));
    last = failure.toKvgateError(d.worker);
    console.error(`kvgate warn: request ${d.request_id}: worker ${d.worker} ${failure.message}`);
    if (retries <= 0) throw last;
    retries--;
    excluded.push(d.worker);
  }
}
