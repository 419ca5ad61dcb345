/**
 * @module TTFT hedging for streams: when a worker's first chunk is later than the learnt percentile for the prompt's
 * size, and the budget allows, a copy goes to the next best worker; the first to produce a chunk serves the client,
 * the other is aborted and its booking freed. The winner's body is handed on with its first chunk put back in front.
 */
import { isKvgateError } from "../core/errors.ts";
import { dispatch } from "./dispatch.ts";
import { dispatchLeg, requestLeg, type Dispatched } from "./dispatch-leg.ts";
import type { Exchange, GatewayState } from "./gateway-state.ts";
import type { HedgePolicy } from "./hedge-policy.ts";
import { hasBody, openBody, type BodyReader } from "./direct-source.ts";

/** One attempt's first body chunk (or its end): `done` with no value when the stream ended or failed before any. */
type First = { d: Dispatched; reader: BodyReader; chunk?: Uint8Array; failed: boolean };

function readFirst(d: Dispatched): Promise<First> {
  const reader = openBody(d.attempt.res)!;
  return reader.read().then((r) => ({ d, reader, chunk: r.done ? undefined : r.value, failed: false }), () => ({ d, reader, failed: true }));
}

/** The attempt as the relay expects it: a response whose body starts with the chunk already read. */
function withFirst(f: First): Dispatched {
  const { reader, chunk } = f;
  let sent = chunk === undefined;
  const body = new ReadableStream<Uint8Array>({
    async pull(c) {
      if (!sent) {
        sent = true;
        c.enqueue(chunk!);
        return;
      }
      try {
        const r = await reader.read();
        if (r.done) c.close();
        else c.enqueue(r.value);
      } catch (e) {
        c.error(e);
      }
    },
    cancel: (why) => reader.cancel(why),
  }, { highWaterMark: 0 });
  const old = f.d.attempt.res;
  const res = new Response(body, { status: old.status, statusText: old.statusText, headers: old.headers });
  return { ...f.d, attempt: { res, abort: f.d.attempt.abort } };
}

/** Frees what a losing attempt holds: its upstream request and its booking (a body being read is its reader's to cancel). */
function drop(d: Dispatched): void {
  d.attempt.abort.abort();
  if (d.attempt.res.body && !d.attempt.res.body.locked) void d.attempt.res.body.cancel().catch(() => {});
  d.handle.cancel();
}

export interface HedgeTimer {
  /** Resolves after `ms`; `cancel` stops it early (it then never resolves). */
  after(ms: number): { done: Promise<void>; cancel(): void };
}

export const realTimer: HedgeTimer = {
  after(ms) {
    let t: ReturnType<typeof setTimeout> | undefined;
    const done = new Promise<void>((resolve) => (t = setTimeout(resolve, ms)));
    return { done, cancel: () => clearTimeout(t) };
  },
};

/** The hedge copy: the same request under its own id, routed with the primary's worker excluded. */
async function dispatchCopy(gw: GatewayState, ex: Exchange, primaryWorker: string): Promise<Dispatched | undefined> {
  const requestId = `${ex.requestId}-hedge`;
  const headers = new Headers(ex.headers);
  headers.set("x-request-id", requestId);
  ex.excluded.push(primaryWorker);
  try {
    return await dispatchLeg(gw, ex, ex.tokens, ex.bodyText, "retriesLeft", { ...requestLeg(ex), requestId, headers, retry: false });
  } catch (e) {
    if (!isKvgateError(e)) throw e;
    return undefined; // no other worker, or it failed: the primary carries on alone
  } finally {
    ex.excluded.splice(ex.excluded.lastIndexOf(primaryWorker), 1);
  }
}

/**
 * dispatch() for a streaming request, hedged when the policy says so. Pinned requests (an explicit worker) and
 * non-2xx answers are never hedged.
 */
export async function hedgedDispatch(gw: GatewayState, ex: Exchange, policy: HedgePolicy, timer: HedgeTimer = realTimer): Promise<Dispatched> {
  const start = gw.fineNow();
  const primary = await dispatch(gw, ex, ex.tokens, ex.bodyText, "retriesLeft");
  if (!policy.enabled || ex.ext.target || !primary.attempt.res.ok || !hasBody(primary.attempt.res)) return primary;
  policy.countRequest();
  const waitMs = policy.thresholdMs(ex.tokens.length);
  const first = readFirst(primary);
  if (waitMs === undefined) {
    const f = await first;
    if (f.chunk !== undefined) policy.observeTtft(ex.tokens.length, gw.fineNow() - start);
    return withFirst(f);
  }
  const elapsed = gw.fineNow() - start;
  const timeout = timer.after(Math.max(0, waitMs - elapsed));
  const early = await Promise.race([first, timeout.done.then(() => undefined)]);
  if (early !== undefined) {
    timeout.cancel();
    if (early.chunk !== undefined) policy.observeTtft(ex.tokens.length, gw.fineNow() - start);
    return withFirst(early);
  }
  if (ex.signal.aborted || !policy.tryAcquire()) return withFirst(await first);
  const copy = await dispatchCopy(gw, ex, primary.signals.worker);
  if (!copy) return withFirst(await first);
  if (!copy.attempt.res.ok || !hasBody(copy.attempt.res)) {
    drop(copy);
    return withFirst(await first);
  }
  const second = readFirst(copy);
  // The first attempt to produce a chunk wins; one that ends or fails without output leaves the race to the other.
  const p = first.then((f) => ({ f, who: "primary" as const })), c = second.then((f) => ({ f, who: "copy" as const }));
  const a = await Promise.race([p, c]);
  let winner = a;
  if (a.f.chunk === undefined) {
    const b = await (a.who === "primary" ? c : p);
    if (b.f.chunk !== undefined) winner = b;
  }
  // The loser goes at once, whether or not it has produced anything: its booking must not outlive the race.
  drop(winner.who === "primary" ? copy : primary);
  void (winner.who === "primary" ? second : first).then((f) => f.reader.cancel().catch(() => {}));
  if (winner.who === "copy") policy.hedgeWon();
  policy.observeTtft(ex.tokens.length, gw.fineNow() - start);
  gw.metrics.hedges.inc({ winner: winner.who });
  return withFirst(winner.f);
}
