/**
 * @module The shared machinery behind every routing entry point (route, query, commit, probe): session claims,
 * candidate resolution with pins and busy filtering, admission (now or via the queue), selection plus booking, signals.
 */
import { KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import { ActiveSequences, type Booking } from "./active-sequences.ts";
import { InflightPrefixes } from "./inflight-prefixes.ts";
import { HotPrefixes } from "./hot-prefixes.ts";
import { AdmissionQueue, type QueueOutcome, type StepResult } from "./admission-queue.ts";
import { rankBusy, saturated, withoutBusy } from "./busy-policy.ts";
import { eligibleRanks, noWorkers, phaseOf, resolveTarget } from "./candidates.ts";
import type { NowFn } from "./clock.ts";
import type { RandomSource } from "./prng.ts";
import type { RouterConfig } from "./router-config.ts";
import type { FreeReason, RouteRequest, RouteSignals } from "./routing-types.ts";
import { routeSignals } from "./route-signals.ts";
import { recencyProfile, type RecencyProfile } from "./recency-bound.ts";
import { OutputLengthPredictor } from "./output-length.ts";
import { Capture, Selector, type CaptureLevel, type Selection } from "./selector.ts";
import type { DecisionRecord } from "./decision-record.ts";
import { SessionAffinity, type AffinityTarget } from "./session-affinity.ts";
import { WorkerRegistry, type RankState } from "./worker-registry.ts";

export interface SessionState {
  id: string;
  /** Held while this request is the session's first (binding) request. */
  token?: number;
  /** The binding this request found, if any. */
  target?: AffinityTarget;
  /** Query-only: read the binding, take no lease, bind nothing. */
  readOnly: boolean;
}

/** One request on its way through admission. */
export interface Pending {
  req: RouteRequest;
  /** Injected-clock time the request entered the router (queue and session waits are measured from here). */
  startedAt: number;
  session?: SessionState;
  /** Booking paths bind a first session request at booking; query-only paths never bind. */
  bindAtBook: boolean;
}

export interface Admitted {
  booking: Booking;
  signals: RouteSignals;
  selection: Selection;
  /** When the request asked to explain or a decision sink listens. */
  decision?: DecisionRecord;
}

interface Resolved {
  candidates: readonly RankState[];
  pinned?: RankState;
  via: RouteSignals["via"];
}

export interface CoreHooks {
  onFree(booking: Booking, reason: FreeReason): void;
  onRouted?(signals: RouteSignals): void;
  onBooked?(booking: Booking): void;
  /** Approximate mode recorded the last hashed prompt on this rank (read it with index.lastSequenceWordsInto now). */
  onRecorded?(worker: string, dpRank: number): void;
  /** Lifetime of the blocks approximate mode records on this rank (default: config.approxTtlMs). */
  approxTtlMs?(worker: string, dpRank: number): number;
  /** Blocks the model of this rank's cache holds at most (its learnt or declared capacity); undefined: bounded by TTL only. */
  approxCapacity?(worker: string, dpRank: number): number | undefined;
  /** A booked decision, filled to `RoutingCore.capture`. */
  onDecided?(record: DecisionRecord): void;
}

/** A prompt in flight on a rank, as refreshInflight sees it: a local booking, or a peer replica's (trackPeerInflight). */
interface InflightRecord {
  readonly rank: RankState;
  readonly keys: Uint32Array | undefined;
  readonly blocks: number;
  recordedAt: number;
  recordedMark: number;
}

export class RoutingCore {
  readonly registry: WorkerRegistry;
  readonly sequences: ActiveSequences;
  readonly selector: Selector;
  /** Local bookings' prompts (through `sequences`) and peers' (Router.remotePrompt): the selector's active overlap. */
  readonly inflight: InflightPrefixes;
  readonly queue: AdmissionQueue<Pending, Admitted>;
  readonly sessions: SessionAffinity;
  /** Output lengths seen per session and fleet-wide, for decode-aware load. */
  readonly outputs = new OutputLengthPredictor();
  /** Hot-prefix spreading's demand per prefix (config.hotPrefixSpread). */
  readonly hotPrefixes: HotPrefixes | undefined;
  /** What every booked selection copies for onDecided (none: nothing, the default). */
  capture: CaptureLevel = Capture.none;
  /** Per index slot, 1: record routed prompts there although the worker has KV events (the closed loop found it blind). */
  readonly recordsRoutes: Uint8Array;
  /** Per index slot, blocks recorded there so far (approximate mode): how far its model has turned over. */
  readonly #recorded: Float64Array;
  /** Peer replicas' in-flight prompts with their hashes (bounded by the replica sync's bookings per peer). */
  readonly #peerInflight = new Set<InflightRecord>();
  #draining = false;
  #drainAgain = false;
  #deferred = 0;
  #drainPending = false;

  /** Per approximate decision with a predicted hit, what its answer can bound the engine's cache with (closed loop). */
  readonly recency = new WeakMap<RouteSignals, RecencyProfile>();

  constructor(readonly index: KvIndex, readonly config: RouterConfig, readonly now: NowFn, readonly fine: NowFn,
    rand: RandomSource, private readonly hooks: CoreHooks) {
    this.registry = new WorkerRegistry(index, config.assumeKvReuse);
    this.recordsRoutes = new Uint8Array(index.options.maxSlots);
    this.#recorded = new Float64Array(index.options.maxSlots);
    const inflight = (this.inflight = new InflightPrefixes(index.options.maxSlots));
    this.sequences = new ActiveSequences(now, {
      inflight, staleBookingMs: config.staleBookingMs, staleCheckEveryMs: config.staleCheckEveryMs,
      onFree: (b, reason) => this.#freed(b, reason),
    });
    this.selector = new Selector(index, this.registry.loads, rand, fine, config.policy, inflight);
    if (config.hotPrefixSpread) this.selector.spread = this.hotPrefixes = new HotPrefixes(now);
    this.queue = new AdmissionQueue(now, {
      policy: config.queuePolicy, maxLength: config.queueMaxLength, maxWaitMs: config.queueMaxWaitMs, retryAfterMs: config.retryAfterMs,
    });
    this.sessions = new SessionAffinity(now, {
      ttlMs: config.sessionTtlMs, maxEntries: config.sessionMaxEntries, maxIdBytes: config.sessionMaxIdBytes,
    });
  }

  get affinityEnabled(): boolean {
    return this.config.sessionTtlMs > 0;
  }

  /**
   * Joins the request's session: reads the binding (query-only), or claims it (waiting while another first request
   * binds). A Hard binding whose worker vanished is handed to this request to re-select — once.
   */
  async enterSession(p: Pending, readOnly: boolean): Promise<void> {
    const id = p.req.sessionId;
    if (id === undefined || !this.affinityEnabled) return;
    this.sessions.validateId(id);
    if (readOnly) {
      p.session = { id, target: this.sessions.peek(id), readOnly: true };
      return;
    }
    let claim = await this.sessions.claim(id, p.req.signal);
    if (claim.kind === "bound" && this.config.affinityMode === "hard" && !this.usable(claim.target, p.req)) {
      const token = this.sessions.takeOver(id, claim.target);
      claim = token !== undefined ? { kind: "first", token } : await this.sessions.claim(id, p.req.signal);
      if (claim.kind === "bound" && !this.usable(claim.target, p.req)) {
        throw new KvgateError("KVGATE_ERR_NO_WORKERS", `session ${id} is bound to ${claim.target.worker}, which is unavailable`);
      }
    }
    p.session = claim.kind === "first" ? { id, token: claim.token, readOnly: false } : { id, target: claim.target, readOnly: false };
  }

  /** Gives up a first-request claim that never got to bind (error, rejection, cancel). */
  leaveSession(p: Pending): void {
    const s = p.session;
    if (s?.token !== undefined) {
      this.sessions.abandon(s.id, s.token);
      s.token = undefined;
    }
  }

  rankOf(t: AffinityTarget): RankState | undefined {
    return this.registry.get(t.worker)?.ranks.find((r) => r.dpRank === t.dpRank);
  }

  /** The target still exists, is healthy, fits the request's model and phase, and is not excluded. */
  usable(t: AffinityTarget, req: RouteRequest): boolean {
    const rank = this.rankOf(t);
    return rank !== undefined && this.registry.isEligible(rank, req.model, phaseOf(req), req.lora) && !req.exclude?.includes(t.worker);
  }

  /** Candidates and pin for the request as the fleet is now; throws NO_WORKERS / ALL_WORKERS_BUSY / target errors. */
  resolve(p: Pending): Resolved {
    const req = p.req;
    const bound = p.session?.target;
    let pinned: RankState | undefined;
    let via: RouteSignals["via"] = "scored";
    if (req.target) {
      pinned = resolveTarget(this.registry, req, req.target);
      via = "target";
      if (bound && this.config.affinityMode === "hard" && (bound.worker !== pinned.worker.id || bound.dpRank !== pinned.dpRank)) {
        throw new KvgateError("KVGATE_ERR_SESSION_CONFLICT",
          `target ${pinned.worker.id}/${pinned.dpRank} disagrees with session binding ${bound.worker}/${bound.dpRank}`);
      }
    }
    if (!pinned && bound && this.config.affinityMode === "hard") {
      if (!this.usable(bound, req)) throw new KvgateError("KVGATE_ERR_NO_WORKERS", `session worker ${bound.worker} is unavailable`);
      pinned = this.rankOf(bound);
      via = "session";
    }
    if (pinned) {
      if (rankBusy(pinned, this.config.busy)) throw allBusy(`worker ${pinned.worker.id}/${pinned.dpRank} is busy`);
      return { candidates: [pinned], pinned, via };
    }
    const base = eligibleRanks(this.registry, req);
    if (base.length === 0) throw noWorkers(req);
    const candidates = withoutBusy(base, this.config.busy);
    if (candidates.length === 0) throw allBusy("all workers are busy");
    // Soft affinity: keep the session's worker while it is a candidate; otherwise score and move the session.
    if (bound) {
      const preferred = this.rankOf(bound);
      if (preferred && candidates.includes(preferred)) return { candidates, pinned: preferred, via: "session" };
    }
    return { candidates, via };
  }

  /** Admits now if the fleet is not saturated for this request; otherwise reports blocked. Throws on routing errors. */
  step(p: Pending): StepResult<Admitted> {
    // Stale bookings go before this request is weighed (never in the middle of booking it).
    this.sequences.expireStaleIfDue();
    if (this.sequences.get(p.req.requestId)) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `request ${p.req.requestId} already holds a booking`);
    }
    const r = this.resolve(p);
    if (saturated(r.pinned ? [r.pinned] : r.candidates, this.config.queueThreshold)) return { kind: "blocked" };
    return { kind: "admitted", value: this.selectAndBook(p, r) };
  }

  /** step(), parking the request in the queue when blocked. Both happen synchronously, before the first await. */
  admit(p: Pending): Promise<QueueOutcome<Admitted>> {
    try {
      const first = this.step(p);
      if (first.kind === "admitted") return Promise.resolve({ kind: "admitted", value: first.value, waitedMs: 0 });
      if (first.kind === "failed") throw first.error;
      return this.park(p);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Queues a request that step() found blocked. */
  park(p: Pending): Promise<QueueOutcome<Admitted>> {
    return this.queue.enqueue(p, {
      priority: p.req.priority ?? 0, uncachedTokens: this.#uncachedEstimate(p), signal: p.req.signal,
    });
  }

  /** Prompt tokens the best eligible rank does not cache: the WSPT work estimate (other policies skip the hashing). */
  #uncachedEstimate(p: Pending): number {
    if (this.config.queuePolicy !== "wspt") return p.req.tokens.length;
    const r = this.resolve(p);
    const s = this.selector.select(p.req, { ...this.#scoreParams(p.req), candidates: r.candidates, pinned: r.pinned, willBook: false });
    return Math.max(0, s.isl - s.bestOverlapBlocks * s.blockSize);
  }

  #scoreParams(req: RouteRequest): { overlapWeight: number; newPrefillFactor: number; inflightCached: boolean; temperature: number; assumeKvReuse: boolean } {
    return {
      inflightCached: this.config.inflightCached,
      overlapWeight: req.overrides?.overlapWeight ?? this.config.overlapWeight,
      newPrefillFactor: this.config.newPrefillFactor,
      temperature: req.overrides?.temperature ?? this.config.temperature,
      assumeKvReuse: this.config.assumeKvReuse,
    };
  }

  /** Blocks the request will add after its prompt: its expected output, rounded up to the blocks it completes. */
  #outputBlocks(req: RouteRequest, sel: Selection): number {
    const out = this.outputs.expect(req.sessionId, req.maxTokens);
    return out > 0 ? Math.ceil((sel.isl + out) / sel.blockSize) - Math.floor(sel.isl / sel.blockSize) : 0;
  }

  /** Selection without booking (query-only, probe); the decision is filled only when the request asks to explain. */
  selectOnly(p: Pending, r: Resolved = this.resolve(p)): { selection: Selection; signals: RouteSignals; decision?: DecisionRecord } {
    const capture = p.req.explain ? Capture.candidates : Capture.none;
    const selection = this.selector.select(p.req, { ...this.#scoreParams(p.req), candidates: r.candidates, pinned: r.pinned, willBook: false, capture });
    const signals = this.signals(p, selection, r.via);
    return { selection, signals, decision: selection.capture && this.#record(p, selection, signals) };
  }

  #record(p: Pending, sel: Selection, signals: RouteSignals): DecisionRecord {
    const c = sel.capture!;
    const record: DecisionRecord = { at: this.now(), model: p.req.model ?? "", signals, candidates: c.candidates, chosen: c.chosen };
    if (c.inputs) record.inputs = c.inputs;
    return record;
  }

  /** Selection, approximate-mode recording and booking in one synchronous turn (nothing can route in between). */
  selectAndBook(p: Pending, r: Resolved): Admitted {
    const req = p.req;
    const capture = req.explain && this.capture < Capture.candidates ? Capture.candidates : this.capture;
    const sel = this.selector.select(req, { ...this.#scoreParams(req), candidates: r.candidates, pinned: r.pinned, willBook: true, capture });
    const rank = sel.rank;
    // A worker without KV events never tells us what it cached: predict that it now holds this prompt (TTL).
    let recency: RecencyProfile | undefined;
    if (this.#recordsRoutesOn(rank)) {
      this.#recorded[rank.slot] = this.#recorded[rank.slot]! + this.index.recordRoute(rank.worker.id, rank.dpRank, this.now(), this.#approxTtl(rank));
      if (this.config.closedLoop && sel.overlapBlocks > 0) recency = recencyProfile(this.index, rank.slot, sel.overlapBlocks, rank.load.activeBlocks);
      this.hooks.onRecorded?.(rank.worker.id, rank.dpRank);
    }
    const s = p.session && !p.session.readOnly ? p.session : undefined;
    const outputBlocks = this.config.decodeAware ? this.#outputBlocks(req, sel) : 0;
    const booking = this.sequences.book(rank, {
      requestId: req.requestId, prefillTokens: sel.isl - sel.expectedCachedTokens, blocks: sel.promptBlocks, keys: sel.keys, sessionId: s?.id,
      outputBlocks,
    });
    booking.recordedMark = this.#recorded[rank.slot]!;
    if (sel.prefixKey >= 0) this.hotPrefixes?.observe(sel.prefixKey, sel.promptBlocks + outputBlocks);
    if (s) {
      this.sessions.acquireLease(s.id);
      if (p.bindAtBook) this.bindSession(s, rank);
    }
    const signals = this.signals(p, sel, r.via);
    if (recency) this.recency.set(signals, recency);
    this.hooks.onRouted?.(signals);
    this.hooks.onBooked?.(booking);
    const decision = sel.capture && this.#record(p, sel, signals);
    if (decision && this.capture !== Capture.none) this.hooks.onDecided?.(decision);
    return { booking, signals, selection: sel, decision };
  }

  /** Binds a first request's session, or moves a soft binding that scoring left. */
  bindSession(s: SessionState, rank: RankState): void {
    const target = { worker: rank.worker.id, dpRank: rank.dpRank };
    if (s.token !== undefined) {
      this.sessions.bind(s.id, s.token, target);
      s.token = undefined;
    } else if (s.target && (s.target.worker !== target.worker || s.target.dpRank !== target.dpRank)) {
      this.sessions.rebind(s.id, target);
    }
    s.target = target;
  }

  signals(p: Pending, sel: Selection, via: RouteSignals["via"]): RouteSignals {
    return routeSignals(p.req.requestId, sel, via, this.queue.depth, {
      hashMatchMs: sel.hashMatchMs, scheduleMs: this.fine() - sel.matchedAt, queueMs: this.now() - p.startedAt,
    });
  }

  /** Runs `fn` with queue draining postponed to its end, so a batch of frees (removal, expiry) drains once. */
  deferDrain<T>(fn: () => T): T {
    this.#deferred++;
    try {
      return fn();
    } finally {
      if (--this.#deferred === 0 && this.#drainPending) {
        this.#drainPending = false;
        this.drain();
      }
    }
  }

  /** Admits queued requests while capacity allows; re-entrant calls (a free inside an admission) loop instead of nesting. */
  drain(): void {
    if (this.#deferred > 0) {
      this.#drainPending = true;
      return;
    }
    if (this.#draining) {
      this.#drainAgain = true;
      return;
    }
    this.#draining = true;
    try {
      do {
        this.#drainAgain = false;
        this.queue.drain((p) => this.step(p));
      } while (this.#drainAgain);
    } finally {
      this.#draining = false;
    }
  }

  /**
   * An engine cannot evict the blocks of a request it is still running, however long ago it was routed; kvgate's model
   * of a rank it records routes for orders blocks by routing time. Under load, where running requests hold most of an
   * engine's blocks, a long-running prompt then ages out of the model while idle prefixes routed after it stay, and
   * those are what the engine evicts. So an in-flight prompt is recorded again once half of the model has turned over
   * since it last was (half its capacity in blocks recorded on the rank, or half the TTL for a rank bounded by TTL
   * only), which keeps it in the model until its request is freed. Returns the blocks recorded.
   */
  refreshInflight(now: number): number {
    let blocks = 0;
    for (const b of this.sequences.live()) blocks += this.#refresh(b, now);
    for (const p of this.#peerInflight) blocks += this.#refresh(p, now);
    return blocks;
  }

  #refresh(b: InflightRecord, now: number): number {
    const rank = b.rank;
    if (b.keys === undefined || !rank.worker.registered || !this.#recordsRoutesOn(rank)) return 0;
    const capacity = this.hooks.approxCapacity?.(rank.worker.id, rank.dpRank);
    if (capacity !== undefined && this.#recorded[rank.slot]! - b.recordedMark < capacity / 2) return 0;
    if (capacity === undefined && now - b.recordedAt < this.#approxTtl(rank) / 2) return 0;
    const n = this.#recordWords(rank, b.keys.subarray(0, 2 * b.blocks), now);
    b.recordedAt = now;
    b.recordedMark = this.#recorded[rank.slot]!;
    return n;
  }

  /**
   * A peer replica's routing decision (its prompt's sequence hashes) on a rank this router models by its routes,
   * recorded as its own are: with the rank's learnt lifetime, and counted in how far the rank's model has turned over.
   * Returns the blocks recorded, or -1 when this router does not model the rank by its routes.
   */
  recordPeerRoute(rank: RankState, words: Uint32Array): number {
    if (!rank.worker.registered || !this.#recordsRoutesOn(rank)) return -1;
    return this.#recordWords(rank, words, this.now());
  }

  /**
   * A peer replica's in-flight prompt on `rank`: the engine cannot evict it either, so it is recorded again as local
   * bookings are while it runs (refreshInflight). Call the returned function when the peer frees it.
   */
  trackPeerInflight(rank: RankState, keys: Uint32Array, blocks: number): () => void {
    const rec: InflightRecord = { rank, keys, blocks, recordedAt: this.now(), recordedMark: this.#recorded[rank.slot]! };
    this.#peerInflight.add(rec);
    return () => void this.#peerInflight.delete(rec);
  }

  #recordWords(rank: RankState, words: Uint32Array, now: number): number {
    const n = this.index.recordSequenceWords(rank.worker.id, rank.dpRank, words, now, this.#approxTtl(rank));
    this.#recorded[rank.slot] = this.#recorded[rank.slot]! + n;
    return n;
  }

  /** A rank kvgate models by what it routes there: no KV events, or a KV-event rank the closed loop found blind. */
  #recordsRoutesOn(rank: RankState): boolean {
    return !rank.worker.kvEvents || this.recordsRoutes[rank.slot] === 1;
  }

  #approxTtl(rank: RankState): number {
    return this.hooks.approxTtlMs?.(rank.worker.id, rank.dpRank) ?? this.config.approxTtlMs;
  }

  #freed(b: Booking, reason: FreeReason): void {
    if (b.sessionId !== undefined) this.sessions.releaseLease(b.sessionId);
    this.hooks.onFree(b, reason);
    this.drain();
  }
}

function allBusy(message: string): KvgateError {
  return new KvgateError("KVGATE_ERR_ALL_WORKERS_BUSY", message);
}
