/**
 * @module Relays an engine's SSE stream from the Worker to the client with the engine's exact bytes (as kvgate's
 * own relay does), reporting to the pool object as it goes: first_token at the first output, complete at [DONE]
 * with the usage (the actual cache hit), cancel when the client leaves or the stream breaks, and keepalive while a
 * long stream runs so its plan's TTL never passes. A broken stream is not continued elsewhere: it ends with an
 * OpenAI error event. A stream whose client stops pulling for the lease has its plan cancelled by a later request
 * (pool-leases.ts): only the booking goes, a client that reads again still gets the rest.
 */
import { KvgateError } from "../../core/errors.ts";
import { SseSplitter } from "../../gateway/sse-splitter.ts";
import { concat, errorEvents, inspectEvent } from "../../gateway/stream-events.ts";
import { clientHeaders, describe, stopAttempt, type Attempt } from "../../gateway/upstream.ts";
import type { Report } from "./pool-client.ts";
import type { PoolLeases } from "./pool-leases.ts";

export function relayStream(attempt: Attempt, client: AbortSignal, stripUsage: boolean, report: (what: Report, body?: Record<string, unknown>) => void,
  extra: Record<string, string>, keepAliveMs: number, lease?: { leases: PoolLeases; planId: string }): Response {
  const reader = attempt.res.body!.getReader();
  const splitter = new SseSplitter();
  let firstToken = false;
  let ended = false;
  let closed = false;
  let usage: unknown;
  // Every half TTL in which the client took output: a long stream keeps its booking, while one whose client vanished
  // unnoticed (no cancel ever reaches this Worker) stops being read, stops renewing, and its plan expires.
  let progressed = false;
  const keepAlive = keepAliveMs > 0 ? setInterval(() => {
    if (!progressed) return;
    progressed = false;
    report("keepalive");
  }, keepAliveMs) : undefined;
  // The lease's expiry ends the plan without a report from here: the request that swept it sends the cancel.
  const held = lease?.leases.open(lease.planId, () => {
    ended = true;
    clearInterval(keepAlive);
  });
  const now = (): number => lease!.leases.now();
  const end = (what: Report, body?: Record<string, unknown>): void => {
    if (ended) return;
    ended = true;
    clearInterval(keepAlive);
    held?.close();
    report(what, body);
  };
  const fail = (c: ReadableStreamDefaultController<Uint8Array>, kind: string, message: string): void => {
    attempt.abort.abort();
    void reader.cancel().catch(() => {});
    end("cancel", { failure: { kind } });
    closed = true;
    c.enqueue(errorEvents(new KvgateError("KVGATE_ERR_UPSTREAM", message)));
    c.close();
  };
  const body = new ReadableStream<Uint8Array>({
    async pull(c) {
      held?.pulling(now());
      try {
        await relayOnce(c);
      } finally {
        held?.pulled(now());
      }
    },
    cancel: () => gone(),
  }, { highWaterMark: 0 });
  async function relayOnce(c: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    while (!closed) {
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch (e) {
        // After [DONE] only the connection's end was lost.
        if (ended) {
          closed = true;
          c.close();
        } else if (!closed) {
          fail(c, "stream", `response body broke: ${describe(e)}`);
        }
        return;
      }
      if (closed) return;
      if (r.done) {
        if (!ended) return fail(c, "truncated", "the stream ended before [DONE]");
        closed = true;
        c.close();
        return;
      }
      const out: Uint8Array[] = [];
      let events;
      try {
        events = splitter.push(r.value);
      } catch (e) {
        return fail(c, "stream", (e as Error).message);
      }
      for (const ev of events) {
        const info = inspectEvent(ev);
        if (info.kind === "error") end("cancel", { failure: { kind: "error_event" } });
        if (info.kind === "chunk") {
          if (info.usage !== undefined) usage = info.usage;
          if (info.usageOnly && stripUsage) continue;
          if (info.output && !firstToken) {
            firstToken = true;
            // A plan whose lease ran out was cancelled by another request: nothing more is reported on it.
            if (!ended) report("first_token");
          }
        }
        if (info.kind === "done") end("complete", usage && typeof usage === "object" ? { usage } : {});
        out.push(ev.raw);
      }
      if (out.length > 0) {
        progressed = true;
        c.enqueue(concat(out));
        return;
      }
    }
  }
  // The client went away (the body is cancelled, or only the request's signal fires): stop the engine's request
  // and give back the booking.
  function gone(): void {
    if (closed) return;
    closed = true;
    end("cancel");
    stopAttempt(attempt, reader);
  }
  client.addEventListener("abort", gone, { once: true });
  const headers = clientHeaders(attempt.res.headers);
  for (const [k, v] of Object.entries(extra)) headers.set(k, v);
  return new Response(body, { status: attempt.res.status, headers });
}
