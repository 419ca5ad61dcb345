/**
 * @module The routing engine's public face for the gateway: fleet changes, route / query / two-phase commit, request
 * lifecycle (first token, end) and housekeeping. Transport-free; time and randomness are injected.
 */
import { KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import type { Booking } from "./active-sequences.ts";
import { performanceNow, type NowFn } from "./clock.ts";
import { createPrng, type RandomSource } from "./prng.ts";
import type { EngineReport, RemoteLoad } from "./rank-load.ts";
import type { WorkerEntry } from "./worker-registry.ts";
import { RequestHandle, type HandleOps } from "./request-handle.ts";
import { validateRequest } from "./request-validation.ts";
import { resolveConfig, validateBusy, type BusyThresholds, type RouterConfig, type RouterConfigInput } from "./router-config.ts";
import { admitRequest } from "./admit-request.ts";
import { RoutingCore, type Pending } from "./routing-core.ts";
import type {
  FreeReason, QueueRejection, RouteRequest, RouteSignals, RouterSnapshot, WorkerHealth, WorkerSpec,
} from "./routing-types.ts";
import { probePrefill, type PrefillProbe } from "./prefill-probe.ts";
import { TwoPhase, type CommitOutcome, type PlanClosed, type PlanView } from "./two-phase.ts";
import { ClosedLoop, type UsageReport } from "./closed-loop.ts";
import type { DecisionRecord } from "./decision-record.ts";
import { captureFor, type FreedInfo, type RouteOutcome, type RouterDeps, type RouterObserver, type TickReport } from "./router-api.ts";

export { isQueueRejected, queueRejectedError } from "./router-api.ts";
export type { CommitOutcome, FreedInfo, RouteOutcome, RouterDeps, RouterObserver, TickReport } from "./router-api.ts";

export class Router {
  readonly config: RouterConfig;
  readonly index: KvIndex;
  readonly #core: RoutingCore;
  readonly #twoPhase: TwoPhase;
  readonly #ops: HandleOps;
  readonly #observer?: RouterObserver;
  readonly #now: NowFn;
  readonly #loop: ClosedLoop;

  constructor(deps: RouterDeps, config: RouterConfigInput = {}) {
    this.config = resolveConfig(config);
    this.index = deps.index;
    this.#now = deps.now;
    this.#observer = deps.observer;
    const rand = deps.random ?? createPrng(this.config.seed);
    this.#core = new RoutingCore(deps.index, this.config, deps.now, deps.fineNow ?? performanceNow, rand, {
      onFree: (b, reason) => this.#onFree(b, reason),
      onRouted: (s) => this.#observer?.routed?.(s),
      onBooked: (b) => this.#observer?.booked?.({
        bookingId: b.id, requestId: b.requestId, worker: b.rank.worker.id, dpRank: b.rank.dpRank, prefillTokens: b.prefillTokens, blocks: b.blocks,
        outputBlocks: b.outputBlocks, sessionId: b.sessionId, keys: b.keys,
      }),
      onRecorded: (worker, dpRank) => this.#observer?.recorded?.({ worker, dpRank }),
      approxTtlMs: (worker, dpRank) => this.#loop.ttlFor(worker, dpRank),
      approxCapacity: (worker, dpRank) => this.#loop.capacityOf(worker, dpRank),
      onDecided: deps.decisions && ((r) => deps.decisions!.decided(r)),
    });
    this.#core.capture = captureFor(deps.decisions);
    this.#loop = new ClosedLoop({
      index: deps.index, registry: this.#core.registry, enabled: this.config.closedLoop, now: deps.now,
      config: { approxTtlMs: this.config.approxTtlMs, minTtlMs: Math.min(1_000, this.config.approxTtlMs), maxTtlMs: Math.max(3_600_000, this.config.approxTtlMs) },
      trust: this.#core.selector.trust, blind: this.#core.recordsRoutes,
      on: { distrusted: (info) => this.#observer?.distrusted?.(info), blind: (info) => this.#observer?.blind?.(info) },
    });
    this.#ops = {
      firstToken: (b) => {
        const done = this.#core.sequences.markPrefillComplete(b);
        if (done) this.#observer?.prefillDone?.({ bookingId: b.id, worker: b.rank.worker.id, dpRank: b.rank.dpRank });
        if (done) this.#core.drain();
        return done;
      },
      free: (b, reason) => this.#core.sequences.free(b, reason),
    };
    this.#twoPhase = new TwoPhase(deps.now, this.#ops, {
      ttlMs: this.config.planTtlMs, maxOpen: this.config.maxOpenPlans, onClosed: (info) => this.#observer?.planClosed?.(info),
    });
  }

  // ---- fleet ----------------------------------------------------------------------------------------------------

  /** Registers the worker; its entry is the one record of it (callers read it, the router alone changes it). */
  addWorker(spec: WorkerSpec): Readonly<WorkerEntry> {
    const entry = this.#core.registry.add(spec);
    this.#core.drain();
    return entry;
  }

  setWorkerHealth(id: string, health: WorkerHealth): void {
    this.#core.registry.setHealth(id, health);
    this.#core.drain();
  }

  /** Whether the worker's KV-event view is cold (lost events): then its cache overlap counts as 0 in scoring. */
  setCacheCold(id: string, cold: boolean): void {
    const w = this.#core.registry.get(id);
    if (w) w.cacheCold = cold;
  }

  /**
   * What the engine reports for one rank (scraped /metrics), or undefined to forget it: feeds the busy policy and
   * lifts the rank's decode load in the cost to the engine's KV usage when that is higher than kvgate's own count.
   */
  setEngineLoad(id: string, dpRank: number, report: EngineReport | undefined): void {
    const w = this.#core.registry.get(id);
    const r = w?.ranks.find((x) => x.dpRank === dpRank);
    if (!w || !r) return;
    r.load.setEngine(report, report && !report.stale && report.kvUsage !== undefined && w.totalKvBlocks !== undefined
      ? Math.round(report.kvUsage * w.totalKvBlocks) : 0);
  }

  /** Load other router replicas hold on one rank (their bookings, shared over NATS): added to this router's own in the cost. */
  setRemoteLoad(id: string, dpRank: number, load: RemoteLoad): void {
    const r = this.#core.rankOf({ worker: id, dpRank });
    if (!r) return;
    r.load.setRemote(load);
    this.#core.drain();
  }

  /**
   * Another replica's booking with its prompt's sequence hashes joins (`add`) or leaves this rank's in-flight prompts,
   * so its blocks are counted once beside local prompts that share them. False when the rank is unknown here, or the
   * prompt to remove is not among them (the worker was re-added meanwhile): the caller counts the blocks plainly.
   */
  remotePrompt(id: string, dpRank: number, keys: Uint32Array, blocks: number, add: boolean): boolean {
    const r = this.#core.rankOf({ worker: id, dpRank });
    if (!r || !r.load.assumeKvReuse) return false;
    // In the rank's prompts (load counts shared prefixes once) and among the in-flight prefixes (the active overlap a
    // prompt has with what is being prefilled there), as a local booking is.
    if (add) {
      r.load.addPrompt(keys, blocks);
      this.#core.inflight.add(keys, blocks, r.slot);
    } else {
      if (!r.load.removePrompt(keys, blocks)) return false;
      this.#core.inflight.remove(keys, blocks);
    }
    return true;
  }

  /**
   * Another replica's routing decision on this rank (its prompt's sequence hashes as u32 pairs), recorded as this
   * router records its own. False when the rank is unknown here or its KV events tell this router what it caches.
   */
  recordPeerRoute(id: string, dpRank: number, words: Uint32Array): boolean {
    const r = this.#core.rankOf({ worker: id, dpRank });
    return r !== undefined && this.#core.recordPeerRoute(r, words) >= 0;
  }

  /**
   * Another replica's in-flight prompt on this rank, recorded again while it runs as local ones are (approximate
   * mode). Returns the function to call when the peer frees it; undefined when the rank is unknown here.
   */
  trackPeerInflight(id: string, dpRank: number, keys: Uint32Array, blocks: number): (() => void) | undefined {
    const r = this.#core.rankOf({ worker: id, dpRank });
    return r && this.#core.trackPeerInflight(r, keys, blocks);
  }

  /** Stops new requests to the worker; its in-flight bookings run to completion. */
  drainWorker(id: string): void {
    this.setWorkerHealth(id, "draining");
  }

  /** Forgets the worker: drops its index entries and frees its bookings. Returns how many bookings were freed. */
  removeWorker(id: string): number {
    // Before the registry forgets the worker: the loop resets its ranks' trust through it.
    this.#loop.forget(id);
    const w = this.#core.registry.remove(id);
    if (!w) return 0;
    const freed = this.#core.deferDrain(() => this.#core.sequences.freeRanks(w.ranks, "worker_removed").length);
    // Peers' prompts on it stay booked until their replicas free them; their slots must not credit the next worker.
    for (const r of w.ranks) this.#core.inflight.removeSlot(r.slot);
    this.#core.drain();
    return freed;
  }

  /** A worker's entry (read-only), or undefined. */
  workerEntry(id: string): Readonly<WorkerEntry> | undefined {
    return this.#core.registry.get(id);
  }

  workerIds(): string[] {
    return [...this.#core.registry.workers()].map((w) => w.id);
  }

  get busyThresholds(): BusyThresholds {
    return { ...this.config.busy };
  }

  /** Runtime update of the busy thresholds (the gateway's busy_threshold endpoint). */
  setBusyThresholds(t: BusyThresholds): void {
    this.config.busy = validateBusy(t);
    this.#core.drain();
  }

  // ---- routing --------------------------------------------------------------------------------------------------

  /**
   * Selects a worker, admits (now or after queueing) and books it. Resolves to routed (forward to signals.endpoint, then
   * report through the handle), queue_rejected (answer 429 + Retry-After) or query (queryOnly requests). Rejects with a
   * KvgateError for bad requests, unknown targets, no workers (503), all workers busy (503) or cancellation.
   */
  route(req: RouteRequest): Promise<RouteOutcome> {
    try {
      validateRequest(req);
      if (req.queryOnly) return this.query(req).then((signals) => ({ kind: "query", signals }));
      return admitRequest(this.#core, req, (out): RouteOutcome => (out.kind === "admitted"
        ? this.#routed(out.value.booking, out.value.signals, out.value.decision) : { kind: "queue_rejected", rejection: out.rejection }));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * route() for a proxy that sends the request itself: the same admission and booking, held as a plan under `planId`
   * until planFirstToken / planEnd or the plan TTL. Throws PLAN_LIMIT (503) when maxOpenPlans plans are open.
   */
  commit(req: RouteRequest, planId: string): Promise<CommitOutcome> {
    return this.#twoPhase.commit(req, planId, (settle) => admitRequest(this.#core, req, settle), (plan) => this.#observer?.planOpened?.(plan));
  }

  #routed(b: Booking, signals: RouteSignals, decision: DecisionRecord | undefined): RouteOutcome {
    const out: RouteOutcome = { kind: "routed", signals, handle: new RequestHandle(b, this.#ops) };
    if (decision) out.decision = decision;
    return out;
  }

  /** What route() would choose now, booking nothing (no admission, no session lease, no approximate recording). */
  async query(req: RouteRequest): Promise<RouteSignals> {
    return (await this.queryDecision(req)).signals;
  }

  /** query() with the decision's candidates table when `req.explain` is set (a preview is not told to the sinks). */
  async queryDecision(req: RouteRequest): Promise<{ signals: RouteSignals; decision?: DecisionRecord }> {
    validateRequest(req);
    const p: Pending = { req, startedAt: this.#now(), bindAtBook: false };
    await this.#core.enterSession(p, true);
    const { signals, decision } = this.#core.selectOnly(p);
    return decision ? { signals, decision } : { signals };
  }

  /** An open plan by id, or undefined (unknown, ended or expired). */
  planOf(planId: string): PlanView | undefined {
    return this.#twoPhase.get(planId);
  }

  /** The proxy saw the plan's first token: its prefill stops loading the worker. Idempotent; PLAN_NOT_FOUND (404) when not open. */
  planFirstToken(planId: string): PlanView {
    return this.#twoPhase.firstToken(planId);
  }

  /** The proxy's request still runs: its plan's TTL starts again. */
  planKeepAlive(planId: string): PlanView {
    return this.#twoPhase.keepAlive(planId);
  }

  /** The proxy's request ended (finished) or was abandoned (cancelled): frees the booking and closes the plan. */
  planEnd(planId: string, reason: "finished" | "cancelled"): PlanView {
    return this.#twoPhase.end(planId, reason);
  }

  /** Is the prefill pool busy above `threshold` (fraction of max batched tokens) for this request? Advisory only. */
  prefillBusy(req: RouteRequest, threshold: number): Promise<PrefillProbe> {
    return probePrefill(this.#core, req, threshold);
  }

  // ---- lifecycle by request id (for callers that keep ids rather than handles) ----------------------------------

  handleOf(requestId: string): RequestHandle | undefined {
    const b = this.#core.sequences.get(requestId);
    return b && new RequestHandle(b, this.#ops);
  }

  firstToken(requestId: string): boolean {
    const b = this.#core.sequences.get(requestId);
    return b !== undefined && this.#ops.firstToken(b);
  }

  release(requestId: string, reason: "finished" | "failed" | "cancelled" = "finished"): boolean {
    const b = this.#core.sequences.get(requestId);
    return b !== undefined && this.#ops.free(b, reason);
  }

  /** A response's usage against its routing-time prediction (the closed loop; see closed-loop.ts). */
  reportUsage(u: UsageReport): void {
    this.#loop.report(u, u.decision && this.#core.recency.get(u.decision));
    if (u.completionTokens !== undefined) this.#core.outputs.observe(u.sessionId, u.completionTokens);
  }

  /** A KV-event batch of the rank was applied (a blind rank is precise again); cheap when none is blind. */
  kvEventsArrived(worker: string, dpRank: number): void {
    this.#loop.eventsArrived(worker, dpRank);
  }

  // ---- housekeeping and signals ---------------------------------------------------------------------------------

  /**
   * Periodic work the gateway schedules (every 100 ms – 1 s): stale bookings, plan TTLs, queue wait limits,
   * idle sessions, approximate-mode TTLs, then a queue drain. Nothing here depends on when it runs, only on now().
   */
  tick(): TickReport {
    const now = this.#now();
    const report: TickReport = this.#core.deferDrain(() => ({
      expiredBookings: this.#core.sequences.expireStale(now),
      expiredPlans: this.#twoPhase.expire(now),
      queueExpired: this.#core.queue.expire(),
      sessionsReaped: this.#core.sessions.reap(),
      approxBlocksExpired: this.index.expire(now),
      approxBlocksRefreshed: this.#core.refreshInflight(now),
    }));
    this.#core.drain();
    return report;
  }

  get queueDepth(): number {
    return this.#core.queue.depth;
  }

  get liveBookings(): number {
    return this.#core.sequences.size;
  }

  /** A session's binding (undefined when unknown), for the admin API and tests. */
  session(id: string): { target?: { worker: string; dpRank: number }; initializing: boolean; leases: number } | undefined {
    return this.#core.sessions.inspect(id);
  }

  /** Sessions bound elsewhere (another router replica) or restored from a snapshot; false when not taken (see SessionAffinity.adopt). */
  adoptSession(id: string, target: { worker: string; dpRank: number }): boolean {
    return this.#core.sessions.adopt(id, target);
  }

  /** The live session bindings. */
  sessionBindings(): IterableIterator<[string, { worker: string; dpRank: number }]> {
    return this.#core.sessions.bindings();
  }

  snapshot(): RouterSnapshot {
    const ranks = [];
    for (const w of this.#core.registry.workers()) {
      for (const r of w.ranks) {
        ranks.push({
          worker: w.id, dpRank: r.dpRank, role: w.role, health: w.health, activeRequests: r.load.activeRequests,
          activeBlocks: r.load.activeBlocks, activePrefillTokens: r.load.activePrefillTokens, expectedOutputBlocks: r.load.outputBlocks,
          totalKvBlocks: w.totalKvBlocks, maxBatchedTokens: w.maxBatchedTokens, remote: { ...r.load.remote },
        });
      }
    }
    const hot = this.#core.hotPrefixes;
    return {
      queueDepth: this.#core.queue.depth, liveBookings: this.#core.sequences.size, sessions: this.#core.sessions.size,
      openPlans: this.#twoPhase.openPlans, ranks, predictions: this.#loop.snapshot(),
      ...(hot && { hotPrefixes: { tracked: hot.size, spread: hot.spreadCount(), decisions: hot.spreadDecisions } }),
    };
  }

  #onFree(b: Booking, reason: FreeReason): void {
    this.#twoPhase.onFree(b, reason);
    this.#observer?.freed?.({ bookingId: b.id, requestId: b.requestId, worker: b.rank.worker.id, dpRank: b.rank.dpRank, reason });
  }
}
