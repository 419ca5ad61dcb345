/**
 * @module Admission and booking of one request, shared by route() and commit(): synchronous when no session is
 * involved (so call order is arrival order), through the session claim otherwise; a request not admitted gives up
 * its session claim.
 */
import type { QueueOutcome } from "./admission-queue.ts";
import type { Admitted, Pending, RoutingCore } from "./routing-core.ts";
import type { RouteRequest } from "./routing-types.ts";

export type Settle<T> = (out: QueueOutcome<Admitted>) => T;

/** Admits `req` now or through the queue; `settle` turns the outcome into the caller's (it may throw). */
export function admitRequest<T>(core: RoutingCore, req: RouteRequest, settle: Settle<T>): Promise<T> {
  const p: Pending = { req, startedAt: core.now(), bindAtBook: true };
  // Without a session the booking (or the queue position) is taken before this returns.
  if (req.sessionId === undefined || !core.affinityEnabled) {
    const first = core.step(p);
    if (first.kind === "admitted") return Promise.resolve(settle({ kind: "admitted", value: first.value, waitedMs: 0 }));
    return settled(core, p, core.park(p), settle);
  }
  return withSession(core, p, settle);
}

async function withSession<T>(core: RoutingCore, p: Pending, settle: Settle<T>): Promise<T> {
  await core.enterSession(p, false);
  return settled(core, p, core.admit(p), settle);
}

async function settled<T>(core: RoutingCore, p: Pending, admission: Promise<QueueOutcome<Admitted>>, settle: Settle<T>): Promise<T> {
  try {
    const out = await admission;
    if (out.kind === "rejected") core.leaveSession(p);
    return settle(out);
  } catch (e) {
    core.leaveSession(p);
    throw e;
  }
}
