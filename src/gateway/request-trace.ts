/**
 * @module One request's spans (names and attributes in docs/observability.md): `kvgate.request` — a child of the
 * client's `traceparent` when it sent one — and below it tokenize, queue_wait, hash_match, schedule, dispatch (one per
 * attempt; its context goes to the engine as `traceparent`), first_token and stream_end. With tracing off every
 * request shares one inert instance, so the request path allocates nothing for it.
 */
import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from "@opentelemetry/api";
import type { RouteSignals } from "../routing/index.ts";
import { formatTraceparent, parseTraceparent } from "../observability/traceparent.ts";
import { epochNow } from "../observability/tracer.ts";

export class RequestTrace {
  readonly #tracer: Tracer | undefined;
  readonly #root: Span | undefined;
  readonly #ctx: Context | undefined;
  #dispatch: Span | undefined;
  #headersAt = 0;
  #firstTokenAt = 0;
  #attempts = 0;
  #ended = false;

  constructor(tracer: Tracer | undefined, headers?: Headers, attributes?: Attributes) {
    this.#tracer = tracer;
    if (!tracer || !headers) return;
    const parent = parseTraceparent(headers.get("traceparent"));
    const base = parent ? trace.setSpanContext(context.active(), parent) : context.active();
    this.#root = tracer.startSpan("kvgate.request", { kind: SpanKind.SERVER, attributes }, base);
    this.#ctx = trace.setSpan(base, this.#root);
  }

  get enabled(): boolean {
    return this.#root !== undefined;
  }

  /** A finished phase as a child span, from times measured around it (epoch ms). */
  #child(name: string, startMs: number, endMs: number, attributes?: Attributes): void {
    this.#tracer!.startSpan(name, { startTime: startMs, attributes }, this.#ctx).end(endMs);
  }

  /** Epoch ms now, for callers timing a phase (0 when tracing is off: nothing reads it). */
  now(): number {
    return this.#root ? epochNow() : 0;
  }

  tokenized(startMs: number, tokens: number, mode: string): void {
    if (!this.#root) return;
    this.#child("kvgate.tokenize", startMs, epochNow(), { "kvgate.prompt_tokens": tokens, "kvgate.tokenizer_mode": mode });
  }

  /**
   * router.route() ran from `startMs` to now: its queue wait, hash-and-match and scheduling (the router's own timings,
   * in ms) become three spans laid end to end inside that interval.
   */
  routed(s: RouteSignals, startMs: number): void {
    if (!this.#root) return;
    const end = epochNow();
    const t = s.timings;
    const schedStart = Math.max(startMs, end - t.scheduleMs), hashStart = Math.max(startMs, schedStart - t.hashMatchMs);
    if (t.queueMs > 0) this.#child("kvgate.queue_wait", startMs, Math.min(hashStart, startMs + t.queueMs), { "kvgate.queue_depth": s.queueDepth });
    this.#child("kvgate.hash_match", hashStart, schedStart, { "kvgate.prompt_blocks": s.promptBlocks, "kvgate.best_overlap_blocks": s.bestOverlapBlocks });
    this.#child("kvgate.schedule", schedStart, end, {
      "kvgate.worker": s.worker, "kvgate.dp_rank": s.dpRank, "kvgate.via": s.via, "kvgate.overlap_blocks": s.overlapBlocks,
      "kvgate.best_overlap_blocks": s.bestOverlapBlocks, "kvgate.cost": s.cost,
    });
    this.#root.setAttributes({
      "kvgate.worker": s.worker, "kvgate.dp_rank": s.dpRank, "kvgate.overlap_blocks": s.overlapBlocks, "kvgate.prompt_blocks": s.promptBlocks,
      "kvgate.cost": s.cost, "kvgate.predicted_hit_rate": s.predictedHitRate,
    });
  }

  /** Starts an attempt's dispatch span; returns the headers to send (with its traceparent), or `headers` itself when off. */
  dispatchStart(s: RouteSignals, url: string, headers: Headers): Headers {
    if (!this.#root) return headers;
    this.#dispatch?.end();
    this.#dispatch = this.#tracer!.startSpan("kvgate.dispatch", {
      kind: SpanKind.CLIENT, attributes: { "kvgate.worker": s.worker, "kvgate.dp_rank": s.dpRank, "url.full": url, "kvgate.attempt": ++this.#attempts },
    }, this.#ctx);
    const h = new Headers(headers);
    h.set("traceparent", formatTraceparent(this.#dispatch.spanContext()));
    return h;
  }

  /** The attempt got response headers (`status`) or failed (`error`). */
  dispatchEnd(status: number | undefined, error?: string): void {
    const d = this.#dispatch;
    if (!d) return;
    this.#dispatch = undefined;
    if (status !== undefined) d.setAttribute("http.response.status_code", status);
    if (error) d.setStatus({ code: SpanStatusCode.ERROR, message: error });
    d.end();
    this.#headersAt = epochNow();
  }

  /** The first generated token reached kvgate (streams): the span from the worker's headers to it. */
  firstToken(): void {
    if (!this.#root || this.#firstTokenAt !== 0) return;
    this.#firstTokenAt = epochNow();
    this.#child("kvgate.first_token", this.#headersAt || this.#firstTokenAt, this.#firstTokenAt);
  }

  /** The answer is complete (whole body read, or the stream's [DONE]): from the first token (or headers) to now. */
  streamEnd(outputTokens?: number): void {
    if (!this.#root) return;
    const start = this.#firstTokenAt || this.#headersAt || epochNow();
    this.#child("kvgate.stream_end", start, epochNow(), outputTokens !== undefined ? { "kvgate.output_chunks": outputTokens } : undefined);
  }

  /** Ends the request span (once): the status the client got, and the error when it failed. */
  end(status: number, error?: string): void {
    if (!this.#root || this.#ended) return;
    this.#ended = true;
    this.#dispatch?.end();
    this.#root.setAttribute("http.response.status_code", status);
    // As the HTTP conventions have it for a server span: a 4xx is the client's doing and leaves the status unset.
    if (status >= 500) this.#root.setStatus({ code: SpanStatusCode.ERROR, message: error });
    else if (error) this.#root.setAttribute("kvgate.error", error);
    this.#root.end();
  }
}

/** The shared inert trace of a gateway without tracing. */
export const NO_TRACE = new RequestTrace(undefined);
