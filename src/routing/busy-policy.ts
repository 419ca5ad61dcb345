/**
 * @module When a rank counts as busy (reject with 503 only if every worker is) and when the fleet is saturated enough
 * that a request must wait in the admission queue. Both count the bookings other router replicas hold (load.remote),
 * as the cost does: a worker that peers filled is as busy as one this replica filled.
 */
import { DEFAULT_MAX_BATCHED_TOKENS, type BusyThresholds } from "./router-config.ts";
import type { RankState, WorkerEntry } from "./worker-registry.ts";

export function hasBusyThresholds(t: BusyThresholds): boolean {
  return t.activeDecodeBlocksFrac !== undefined || t.activePrefillTokens !== undefined || t.activePrefillTokensFrac !== undefined ||
    t.engineWaiting !== undefined || t.engineKvUsage !== undefined || t.engineStale === true;
}

/** Prefill tokens in flight on the rank: this replica's and its peers'. */
export function prefillTokensOf(rank: RankState): number {
  return rank.load.activePrefillTokens + rank.load.remote.prefillTokens;
}

/** Any configured threshold exceeded; a threshold that needs an unknown capacity is skipped for that worker. */
export function rankBusy(rank: RankState, t: BusyThresholds): boolean {
  const load = rank.load, w = rank.worker;
  const prefill = prefillTokensOf(rank);
  if (t.activeDecodeBlocksFrac !== undefined && w.totalKvBlocks !== undefined &&
      (load.activeBlocks + load.remote.blocks) / w.totalKvBlocks > t.activeDecodeBlocksFrac) return true;
  if (t.activePrefillTokens !== undefined && prefill > t.activePrefillTokens) return true;
  if (t.activePrefillTokensFrac !== undefined && w.maxBatchedTokens !== undefined &&
      prefill > t.activePrefillTokensFrac * w.maxBatchedTokens) return true;
  // What the engine itself reports (other routers' traffic included); stale reports count as saturated.
  const e = load.engine;
  if (e !== undefined) {
    if (e.stale) return t.engineStale === true;
    if (t.engineWaiting !== undefined && e.waiting > t.engineWaiting) return true;
    if (t.engineKvUsage !== undefined && e.kvUsage !== undefined && e.kvUsage > t.engineKvUsage) return true;
  }
  return false;
}

/**
 * Drops the ranks of workers that are busy; a data-parallel worker is busy only when all of its candidate ranks are.
 * Returns the input array itself when nothing is dropped (the common case costs no allocation).
 */
export function withoutBusy(ranks: readonly RankState[], t: BusyThresholds): readonly RankState[] {
  if (!hasBusyThresholds(t) || ranks.length === 0) return ranks;
  let first = 0;
  while (first < ranks.length && !rankBusy(ranks[first]!, t)) first++;
  if (first === ranks.length) return ranks;
  // Only once a rank is busy are idle workers collected (before, every request built a set of the whole fleet).
  const idle = new Set<WorkerEntry>();
  for (let i = 0; i < first; i++) idle.add(ranks[i]!.worker);
  for (let i = first + 1; i < ranks.length; i++) if (!rankBusy(ranks[i]!, t)) idle.add(ranks[i]!.worker);
  return idle.size === 0 ? [] : ranks.filter((r) => idle.has(r.worker));
}

/** Prefill tokens above which a rank no longer admits work without queueing. */
export function queueLimitOf(rank: RankState, threshold: number): number {
  return threshold * (rank.worker.maxBatchedTokens ?? DEFAULT_MAX_BATCHED_TOKENS);
}

/** True when every rank is above the queue threshold (an empty list is never saturated: selection reports it). */
export function saturated(ranks: readonly RankState[], threshold: number | null): boolean {
  if (threshold === null || ranks.length === 0) return false;
  for (const r of ranks) if (prefillTokensOf(r) <= queueLimitOf(r, threshold)) return false;
  return true;
}
