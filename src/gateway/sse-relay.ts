/**
 * @module Relays a worker's SSE stream to the client event by event, with the worker's exact bytes (no
 * re-framing), while watching it: the first generated token ends the prompt's prefill on the booking, [DONE]
 * frees it, usage records the actual cache hit. If the worker fails first, the request is retried on another one;
 * if it fails after output, the stream migrates (see migration.ts) and the client keeps reading one stream.
 * A client that goes away cancels the worker's request and the booking.
 */
import { KvgateError } from "../core/errors.ts";
import type { Budget, Dispatched } from "./dispatch-leg.ts";
import { dispatch } from "./dispatch.ts";
import type { Exchange, GatewayState } from "./gateway-state.ts";
import { continuationBody, notMigratable, remainingTokens, shiftUsage } from "./migration.ts";
import { ChunkScanner } from "./chunk-scan.ts";
import { attachDirectSource, openBody, type BodyReader, type ChunkSink, type DirectSource } from "./direct-source.ts";
import { SseSplitter } from "./sse-splitter.ts";
import type { StreamLease } from "./stream-leases.ts";
import { recordUsage } from "./usage-feedback.ts";
import { concat, DONE_EVENT, errorEvents, inspectEvent, rewriteChunk, type EventInfo } from "./stream-events.ts";
import { clientHeaders, describe, stopAttempt, UpstreamFailure } from "./upstream.ts";

export class SseRelay {
  #cur: Dispatched;
  #reader: BodyReader;
  /** Who reads the client's body: its stream, or an adapter through the direct source (never both). */
  #consumer: "stream" | "direct" | undefined;
  #splitter = new SseSplitter();
  #scanner = new ChunkScanner();
  #identity: { id?: unknown; created?: unknown } | undefined;
  /** The current attempt continues a stream the client already reads: re-label its chunks. */
  #rewriting = false;
  #tokensBefore = 0;
  #attemptOutput = false;
  #attemptUsage: unknown;
  #generated = "";
  #tokens = 0;
  #forwarded = 0;
  #firstTokenAt = 0;
  #lastTokenAt = 0;
  #finishSeen = false;
  #doneSeen = false;
  #unmigratable: string | undefined;
  #closed = false;
  /** Idle watchdog: one timer per stream, re-armed lazily, instead of a timer per chunk. */
  #lastRead = 0;
  #idleFired = false;
  #watchdog: ReturnType<typeof setTimeout> | undefined;
  /** Where the runtime may drop a gone client silently: the booking is given back when pulls stop (stream-leases.ts). */
  #lease: StreamLease | undefined;

  constructor(private readonly gw: GatewayState, private readonly ex: Exchange, first: Dispatched) {
    this.#cur = first;
    this.#reader = openBody(first.attempt.res)!;
    ex.signal.addEventListener("abort", () => this.#cancel(), { once: true });
    this.#lease = gw.leases.open(gw.fineNow(), () => this.#abandoned());
  }

  /** The client's response: the worker's status and headers, kvgate's body. */
  response(extraHeaders: Record<string, string>): Response {
    const headers = clientHeaders(this.#cur.attempt.res.headers);
    for (const [k, v] of Object.entries(extraHeaders)) headers.set(k, v);
    const status = this.#cur.attempt.res.status;
    // An adapter that takes the source never reads a body stream: none is built (see GatewayHost.takesDirectSources).
    const res = this.gw.takesDirectSources ? new Response(null, { status, headers }) : new Response(new ReadableStream<Uint8Array>({
      pull: (c) => {
        if (this.#consumer === "direct") return c.error(new TypeError("the body is read through its direct source"));
        this.#consumer = "stream";
        return this.#pull(c);
      },
      cancel: () => this.#cancel(),
    }, { highWaterMark: 0 }), { status, headers });
    const source: DirectSource = { pull: (sink) => this.#pull(sink), cancel: () => this.#cancel() };
    attachDirectSource(res, () => {
      if (this.#consumer !== undefined) return undefined;
      this.#consumer = "direct";
      return source;
    });
    return res;
  }

  /** Arms the idle watchdog: after idleTimeoutMs without a chunk the attempt is aborted and counted as idle. */
  #watch(): void {
    const idleMs = this.gw.config.upstream.idleTimeoutMs;
    this.#lastRead = this.gw.fineNow();
    this.#idleFired = false;
    const check = (): void => {
      this.#watchdog = undefined;
      if (this.#closed) return;
      const quiet = this.gw.fineNow() - this.#lastRead;
      if (quiet < idleMs) {
        this.#watchdog = setTimeout(check, idleMs - quiet);
        return;
      }
      this.#idleFired = true;
      this.#cur.attempt.abort.abort();
      void this.#reader.cancel().catch(() => {});
    };
    if (this.#watchdog === undefined) this.#watchdog = setTimeout(check, idleMs);
  }

  #unwatch(): void {
    if (this.#watchdog !== undefined) clearTimeout(this.#watchdog);
    this.#watchdog = undefined;
  }

  #idleFailure(): UpstreamFailure {
    return new UpstreamFailure("idle", `no data for ${this.gw.config.upstream.idleTimeoutMs} ms`);
  }

  #pull(controller: ChunkSink): Promise<void> {
    const lease = this.#lease;
    if (!lease) return this.#next(controller);
    lease.pulling(this.gw.fineNow());
    return this.#next(controller).finally(() => lease.pulled(this.gw.fineNow()));
  }

  /** Reads the worker until something can be forwarded, the stream ends, or it fails over. */
  async #next(controller: ChunkSink): Promise<void> {
    if (this.#watchdog === undefined && !this.#closed) this.#watch();
    while (!this.#closed) {
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await this.#reader.read();
      } catch (e) {
        if (this.#closed) return;
        const f = this.#idleFired ? this.#idleFailure() : new UpstreamFailure("stream", `response body broke: ${describe(e)}`);
        if (!(await this.#failover(controller, f))) return;
        continue;
      }
      if (this.#closed) return;
      this.#lastRead = this.gw.fineNow();
      if (this.#idleFired) {
        if (!(await this.#failover(controller, this.#idleFailure()))) return;
        continue;
      }
      if (r.done) {
        if (this.#doneSeen) {
          this.#close(controller);
          return;
        }
        if (!(await this.#failover(controller, new UpstreamFailure("truncated", "the stream ended before [DONE]")))) return;
        continue;
      }
      let broke: UpstreamFailure | undefined;
      const out: Uint8Array[] = [];
      try {
        for (const ev of this.#splitter.push(r.value)) {
          // Parsed whole while the stream's identity is unknown or its chunks are re-labelled; scanned otherwise.
          const info = this.#identity === undefined || this.#rewriting ? inspectEvent(ev) : this.#scanner.scan(ev);
          if (info.kind === "error") {
            const msg = (info.json?.error as { message?: unknown })?.message;
            broke = new UpstreamFailure("error_event", `sent an error mid-stream${typeof msg === "string" ? `: ${msg}` : ""}`);
            break;
          }
          const bytes = info.kind === "chunk" ? this.#chunk(info, ev.raw) : ev.raw;
          if (info.kind === "done") this.#done();
          if (bytes) out.push(bytes);
        }
      } catch (e) {
        broke = new UpstreamFailure("stream", (e as Error).message);
      }
      if (out.length > 0) {
        controller.enqueue(concat(out));
        this.#forwarded += out.length;
      }
      if (broke && !(await this.#failover(controller, broke))) return;
      if (out.length > 0) return;
    }
  }

  /** What to forward for one chunk (undefined: drop it), updating the stream's state. */
  #chunk(info: EventInfo, raw: Uint8Array): Uint8Array | undefined {
    const json = info.json;
    if (this.#identity === undefined && json) this.#identity = { id: json.id, created: json.created };
    if (info.usage !== undefined) this.#attemptUsage = info.usage;
    if (info.usageOnly && this.ex.stripUsage) return undefined;
    if (this.#rewriting && info.roleOnly) return undefined;
    if (info.output) {
      const now = this.gw.fineNow();
      if (!this.#attemptOutput) {
        this.#attemptOutput = true;
        this.#cur.handle.firstToken();
        if (this.#tokens === 0) {
          this.ex.trace.firstToken();
          this.#firstTokenAt = now;
          this.gw.metrics.firstToken((now - this.ex.arrivedAt) / 1000);
        }
      }
      if (info.text.length > 0 || info.unmigratable) {
        this.#tokens++;
        this.#lastTokenAt = now;
      }
      this.#generated += info.text;
      if (info.finish) this.#finishSeen = true;
      this.#unmigratable ??= info.unmigratable;
    }
    return this.#rewriting && json ? rewriteChunk(json, this.#identity ?? {}, (u) => shiftUsage(u, this.#tokensBefore)) : raw;
  }

  /** [DONE]: generation is over; free the booking now, close when the worker closes. */
  #done(): void {
    if (this.#doneSeen) return;
    this.#doneSeen = true;
    this.#cur.handle.finish();
    this.ex.trace.streamEnd(this.#tokens);
    this.#recordUsage();
    const m = this.gw.metrics;
    const now = this.gw.fineNow();
    m.duration.observe({ endpoint: this.ex.endpoint }, (now - this.ex.arrivedAt) / 1000);
    if (this.#tokens > 1) m.interToken((this.#lastTokenAt - this.#firstTokenAt) / (this.#tokens - 1) / 1000);
  }

  #recordUsage(): void {
    if (this.#attemptUsage !== undefined && !this.#cur.kvTransferred) recordUsage(this.gw, this.#cur.signals, this.#attemptUsage, this.ex);
    this.#attemptUsage = undefined;
  }

  #close(controller: ChunkSink): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unwatch();
    this.#lease?.close();
    controller.close();
    void this.#reader.cancel().catch(() => {});
    this.ex.trace.end(200);
  }

  #endWithError(controller: ChunkSink, e: unknown): void {
    const err = e instanceof KvgateError ? e : new KvgateError("KVGATE_ERR_UPSTREAM", String((e as Error)?.message ?? e));
    if (this.#closed) return;
    this.gw.log("warn", `request ${this.ex.requestId}: stream ended with an error: ${err.message}`);
    controller.enqueue(errorEvents(err));
    this.ex.trace.end(err.status, err.message);
    this.#closed = true;
    this.#unwatch();
    this.#lease?.close();
    controller.close();
  }

  /**
   * The current attempt failed. Returns true when another attempt now feeds the stream, false when the stream
   * was ended (gracefully if generation had finished, else with an error event).
   */
  async #failover(controller: ChunkSink, failure: UpstreamFailure): Promise<boolean> {
    const { gw, ex } = this;
    const worker = this.#cur.signals.worker;
    this.#cur.attempt.abort.abort();
    void this.#reader.cancel().catch(() => {});
    if (this.#doneSeen || this.#finishSeen) {
      // Only trailing events (usage, [DONE]) were lost; the output is complete.
      this.#done();
      if (!this.#closed) controller.enqueue(DONE_EVENT);
      this.#close(controller);
      return false;
    }
    this.#cur.handle.fail();
    this.#recordUsage();
    gw.metrics.upstreamFailures.inc({ kind: failure.kind });
    if (failure.kind === "stream") gw.health.connectFailed(worker);
    gw.log("warn", `request ${ex.requestId}: worker ${worker} ${failure.message}`);
    const before = this.#tokens === 0;
    const budget: Budget = before ? "retriesLeft" : "migrationsLeft";
    const why = ex.ext.target ? "the request is pinned to a worker" : this.#unmigratable ?? (before ? undefined : notMigratable(ex.endpoint, ex.body));
    if (why || ex[budget] <= 0) {
      const base = failure.toKvgateError(worker);
      this.#endWithError(controller, why ? new KvgateError(base.code, `${base.message}; not continued elsewhere: ${why}`, base.detail) : base);
      return false;
    }
    const left = before ? undefined : remainingTokens(ex.endpoint, ex.body, this.#tokens);
    if (left !== undefined && left <= 0) {
      this.#done();
      controller.enqueue(DONE_EVENT);
      this.#close(controller);
      return false;
    }
    ex[budget]--;
    ex.excluded.push(worker);
    if (before) gw.metrics.retries.inc({ reason: failure.kind });
    else gw.metrics.migrations.inc({ endpoint: ex.endpoint });
    let next: Dispatched;
    try {
      let { tokens, bodyText } = ex;
      if (!before) {
        const body = continuationBody(ex.endpoint, ex.body, this.#generated, this.#tokens);
        bodyText = JSON.stringify(body);
        const t = await gw.tokenizers.tokenize(ex.endpoint, body, ex.tokenizerModel);
        tokens = t.tokens.subarray(0, gw.config.index.maxPromptTokens);
      }
      next = await dispatch(gw, ex, tokens, bodyText, budget);
    } catch (e) {
      if (!this.#closed) this.#endWithError(controller, e);
      return false;
    }
    if (this.#closed) {
      next.attempt.abort.abort();
      next.handle.cancel();
      return false;
    }
    const res = next.attempt.res;
    const reader = res.ok ? openBody(res) : undefined;
    if (!reader) {
      const text = await res.text().catch(() => "");
      next.handle.fail();
      this.#endWithError(controller, new KvgateError("KVGATE_ERR_UPSTREAM", `worker ${next.signals.worker} refused the continuation (${res.status}): ${text.slice(0, 300)}`));
      return false;
    }
    gw.log("info", `request ${ex.requestId}: ${before ? "retried" : "migrated"} from ${worker} to ${next.signals.worker} after ${this.#tokens} tokens`);
    this.#cur = next;
    this.#reader = reader;
    this.#splitter = new SseSplitter();
    this.#rewriting = this.#forwarded > 0;
    this.#tokensBefore = this.#tokens;
    this.#attemptOutput = false;
    this.#watch();
    return true;
  }

  /** The client went away: stop the worker's request and give back its booking. */
  #cancel(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unwatch();
    this.#lease?.close();
    // The booking goes back first, so nothing the stop below does can keep it.
    this.#cur.handle.cancel();
    this.gw.metrics.cancellations.inc();
    this.ex.trace.end(499, "the client went away");
    stopAttempt(this.#cur.attempt, this.#reader);
  }

  /**
   * The client stopped pulling for the lease: called from another request's housekeeping, as the runtime may have
   * ended this one without a word. Only the booking goes: should the client read again, the stream goes on.
   */
  #abandoned(): void {
    this.#lease = undefined;
    if (this.#closed) return;
    this.#cur.handle.cancel();
  }
}
