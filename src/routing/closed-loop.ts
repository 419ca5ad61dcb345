/**
 * @module Acts on the prediction monitor's verdicts: a precise-mode rank whose engine keeps reporting far fewer cached
 * tokens than its index promised loses its index entries (they come back only as the engine's events confirm them),
 * one whose engine keeps prefilling with no event of it arriving is routed as an approximate rank until they do, and
 * approximate-mode ranks are modelled as LRU caches of a learnt capacity (a learnt lifetime until one is known).
 */
import type { KvIndex } from "../core/kv-index.ts";
import { CapacityLearner } from "./capacity-learner.ts";
import { LoadTrust, trustBand } from "./load-trust.ts";
import { PredictionMonitor, rankMapKey, type PredictionConfig, type RankPrediction } from "./prediction-monitor.ts";
import type { WorkerRegistry } from "./worker-registry.ts";
import { missBound, type RecencyProfile } from "./recency-bound.ts";
import type { RouteSignals } from "./routing-types.ts";

/** One response's usage set against what was predicted when it was routed. */
export interface UsageReport {
  worker: string;
  dpRank: number;
  /** Cached tokens predicted on the chosen rank at routing time (RouteSignals.cachedTokens). */
  predictedTokens: number;
  /** usage.prompt_tokens_details.cached_tokens as the engine reported it. */
  reportedTokens: number;
  /** usage.prompt_tokens. */
  promptTokens: number;
  /**
   * The engine's KV events removed blocks on the rank between routing and this answer: a miss may then be an eviction
   * (a saturated engine), not a stale index, so the answer cannot get the rank flagged.
   */
  evictedSince?: boolean;
  /** Prefill tokens queued on the rank ahead of the request when it was routed (RouteSignals.queuedPrefillTokens). */
  queuedPrefillTokens?: number;
  /** usage.completion_tokens, when the answer is complete (decode-aware load learns output lengths from it). */
  completionTokens?: number;
  sessionId?: string;
  /** The decision answered, when the caller has it: an approximate rank's answer then bounds its cache (recency-bound.ts). */
  decision?: RouteSignals;
}

export interface DistrustInfo {
  worker: string;
  dpRank: number;
  /** Reported over predicted cached tokens when the rank was flagged. */
  ratio: number;
  /** Index entries dropped for the rank. */
  droppedEntries: number;
}

export interface BlindInfo {
  worker: string;
  dpRank: number;
  /** true: the rank went blind (routed as approximate from now on); false: its events arrived again. */
  blind: boolean;
  /** Blind: answers that prefilled new blocks since the rank's last event batch, and over how many ms. */
  prefills?: number;
  silentMs?: number;
}

/** What the loop did, for metrics and logs; called synchronously, must not throw. */
export interface ClosedLoopEvents {
  distrusted?(info: DistrustInfo): void;
  blind?(info: BlindInfo): void;
}

export interface ClosedLoopDeps {
  index: KvIndex;
  registry: WorkerRegistry;
  /** Off: the figures are still kept (metrics, stats), but nothing is acted on. */
  enabled: boolean;
  config: Partial<PredictionConfig>;
  /**
   * Per index slot and trust band (load-trust.ts), the factor the selector credits a rank's overlap with; the loop
   * writes each rank's learnt reported/predicted ratio there (capped at 1), and 1 when the rank starts over.
   */
  trust: Float64Array;
  /**
   * Per index slot, 1 while the loop routes a KV-event rank as an approximate one (the routing core then records each
   * prompt it sends there, as it does for a worker without KV events).
   */
  blind: Uint8Array;
  now: () => number;
  on?: ClosedLoopEvents;
}

/** Answers since a KV-event rank's last event batch that must have stored new blocks on its engine. */
interface Silence {
  prefills: number;
  since: number;
}

export class ClosedLoop {
  readonly monitor: PredictionMonitor;
  readonly capacity = new CapacityLearner();
  /** The index generation the core's slot capacities were set in (a trap rebuilds the core without them). */
  #generation: number;
  /** Precise ranks routed as approximate ones because their engines' events stopped reaching the router. */
  readonly #blind = new Set<string>();
  readonly #silence = new Map<string, Silence>();
  private readonly index: KvIndex;
  private readonly registry: WorkerRegistry;
  private readonly enabled: boolean;
  readonly #trust: LoadTrust;
  private readonly blind: Uint8Array;
  private readonly now: () => number;
  private readonly on: ClosedLoopEvents;

  constructor(d: ClosedLoopDeps) {
    ({ index: this.index, registry: this.registry, enabled: this.enabled, blind: this.blind, now: this.now } = d);
    this.on = d.on ?? {};
    this.monitor = new PredictionMonitor(d.config);
    this.#trust = new LoadTrust(d.trust, this.monitor.config.alpha, this.monitor.config.minSamples);
    this.#generation = d.index.generation;
  }

  /** One answer; `recency`: what was kept of its decision on an approximate rank (RoutingCore.recency). */
  report(u: UsageReport, recency?: RecencyProfile): void {
    const w = this.registry.get(u.worker);
    const rank = w?.ranks.find((r) => r.dpRank === u.dpRank);
    if (!w || !rank) return;
    const k = rankMapKey(u.worker, u.dpRank);
    const precise = w.kvEvents && !this.#blind.has(k);
    const governed = !precise && this.enabled && this.capacity.blocksOf(k) !== undefined;
    const verdict = this.monitor.observe(u.worker, u.dpRank, u.predictedTokens, u.reportedTokens, u.promptTokens, precise, !governed, u.evictedSince !== true);
    if (!this.enabled) return;
    if (precise && u.promptTokens - u.reportedTokens >= w.blockSize && this.#silent(k)) {
      const s = this.#silence.get(k)!;
      this.#silence.delete(k);
      this.#blind.add(k);
      this.blind[rank.slot] = 1;
      this.monitor.reset(u.worker, u.dpRank);
      this.#trust.reset(rank.slot);
      this.on.blind?.({ worker: u.worker, dpRank: u.dpRank, blind: true, prefills: s.prefills, silentMs: this.now() - s.since });
      return;
    }
    if (!precise) {
      const bound = recency && missBound(recency, u.reportedTokens, w.blockSize, this.index.slotClockOf(rank.slot));
      const moved = this.capacity.observe(k, u.predictedTokens, u.reportedTokens, w.blockSize, () => this.index.treeSizeOfSlot(rank.slot), bound);
      if (moved !== undefined) this.index.setSlotCapacity(u.worker, u.dpRank, moved);
    }
    // Approximate ranks too: what their model still gets wrong (an engine evicting blocks while a request waits in its
    // queue) discounts what they are expected to report, and the prefill their bookings hold.
    const p = Math.min(u.predictedTokens, u.promptTokens), r = Math.min(u.reportedTokens, u.promptTokens);
    this.#trust.observe(rank.slot, trustBand(u.queuedPrefillTokens ?? 0), p, r, this.monitor.trustOf(u.worker, u.dpRank));
    if (verdict !== "flagged") return;
    const ratio = this.monitor.snapshot().find((p) => p.worker === u.worker && p.dpRank === u.dpRank)?.ratio ?? 0;
    const before = this.index.treeSizeOfSlot(rank.slot);
    // Clearing the slot keeps it (and the rank's cached slot number) while dropping every block it claimed.
    this.index.withCore("clear_slot", (c) => c.clear_slot(rank.slot));
    this.monitor.reset(u.worker, u.dpRank);
    this.#trust.reset(rank.slot);
    this.on.distrusted?.({ worker: u.worker, dpRank: u.dpRank, ratio, droppedEntries: before });
  }

  /**
   * A KV-event batch of the rank was applied: a blind rank's events reach the router again, so it is precise once more.
   * What it recorded while blind stays, bounded by the rank's capacity, and goes as its engine's events or the
   * over-prediction check say.
   */
  eventsArrived(worker: string, dpRank: number): void {
    if (this.#blind.size === 0 && this.#silence.size === 0) return;
    const k = rankMapKey(worker, dpRank);
    this.#silence.delete(k);
    if (!this.#blind.delete(k)) return;
    const rank = this.registry.get(worker)?.ranks.find((r) => r.dpRank === dpRank);
    if (rank) this.blind[rank.slot] = 0;
    this.capacity.forget(k);
    this.monitor.reset(worker, dpRank);
    this.on.blind?.({ worker, dpRank, blind: false });
  }

  /** One more answer that stored new blocks on the rank's engine without an event batch since: is that too many? */
  #silent(k: string): boolean {
    const now = this.now();
    let s = this.#silence.get(k);
    if (!s) this.#silence.set(k, (s = { prefills: 0, since: now }));
    s.prefills++;
    const c = this.monitor.config;
    return s.prefills >= c.blindAfterPrefills && now - s.since >= c.blindAfterMs;
  }

  /**
   * The lifetime approximate mode records this rank's next prompt with. A rank with a capacity (its worker declares
   * its KV blocks, or one was learnt) is bounded by it, as its engine is, and its blocks get the longest lifetime.
   */
  ttlFor(worker: string, dpRank: number): number {
    if (!this.enabled) return this.monitor.config.approxTtlMs;
    const k = rankMapKey(worker, dpRank);
    this.#reapply();
    if (this.capacity.blocksOf(k) === undefined) {
      const declared = this.registry.get(worker)?.totalKvBlocks;
      if (declared === undefined) return this.monitor.ttlFor(worker, dpRank);
      this.index.setSlotCapacity(worker, dpRank, this.capacity.start(k, declared));
    }
    return this.monitor.config.maxTtlMs;
  }

  /** The blocks approximate mode's model of this rank holds at most (learnt or declared); undefined while bounded by TTL only. */
  capacityOf(worker: string, dpRank: number): number | undefined {
    return this.enabled ? this.capacity.blocksOf(rankMapKey(worker, dpRank)) : undefined;
  }

  /** After a trap rebuilt the core, its slots have no capacities: set the learnt ones again. */
  #reapply(): void {
    if (this.index.generation === this.#generation) return;
    this.#generation = this.index.generation;
    for (const w of this.registry.workers()) {
      for (const r of w.ranks) {
        if (w.kvEvents && !this.#blind.has(rankMapKey(w.id, r.dpRank))) continue;
        const blocks = this.capacity.blocksOf(rankMapKey(w.id, r.dpRank));
        if (blocks !== undefined) this.index.setSlotCapacity(w.id, r.dpRank, blocks);
      }
    }
  }

  /** The worker left or its view was rebuilt from scratch: its samples no longer describe anything. */
  forget(worker: string): void {
    for (const r of this.registry.get(worker)?.ranks ?? []) {
      this.#trust.reset(r.slot);
      this.blind[r.slot] = 0;
      this.#blind.delete(rankMapKey(worker, r.dpRank));
      this.#silence.delete(rankMapKey(worker, r.dpRank));
      this.capacity.forget(rankMapKey(worker, r.dpRank));
    }
    this.monitor.reset(worker);
  }

  snapshot(): RankPrediction[] {
    const out = this.monitor.snapshot().map((p) => {
      const blind = this.#blind.has(rankMapKey(p.worker, p.dpRank));
      const precise = (this.registry.get(p.worker)?.kvEvents ?? true) && !blind;
      const cap = precise ? undefined : this.capacity.blocksOf(rankMapKey(p.worker, p.dpRank));
      const row = blind ? { ...p, precise, blind } : { ...p, precise };
      // A rank bounded by a capacity records its blocks with the longest lifetime (ttlFor), and says so.
      return cap === undefined ? row : { ...row, capacityBlocks: cap, ttlMs: this.monitor.config.maxTtlMs };
    });
    // A rank that just went blind has no samples yet (they started over), but it is blind all the same.
    for (const w of this.#blind.size > 0 ? this.registry.workers() : []) {
      for (const r of w.ranks) {
        const k = rankMapKey(w.id, r.dpRank);
        if (!this.#blind.has(k) || out.some((p) => p.worker === w.id && p.dpRank === r.dpRank)) continue;
        const cap = this.capacity.blocksOf(k);
        out.push({ worker: w.id, dpRank: r.dpRank, samples: 0, predictedTokens: 0, reportedTokens: 0, error: 0, ratio: 1, flagged: false,
          ttlMs: cap === undefined ? this.monitor.ttlFor(w.id, r.dpRank) : this.monitor.config.maxTtlMs, precise: false, blind: true,
          ...(cap === undefined ? {} : { capacityBlocks: cap }) });
      }
    }
    return out;
  }
}
