/**
 * @module The non-KV worker choices (round-robin, random, least-loaded) beside the default KV cost function, so one
 * router can serve as its own baseline: the replay bench compares them on identical fleets and arrival schedules.
 */
import { KvgateError } from "../core/errors.ts";
import type { RandomSource } from "./prng.ts";
import type { RankState } from "./worker-registry.ts";

/** "kv" is the cost function (cache overlap + load); the others ignore the cache. */
export type RoutingPolicy = "kv" | "round_robin" | "random" | "least_loaded";

export const ROUTING_POLICIES: readonly RoutingPolicy[] = ["kv", "round_robin", "random", "least_loaded"];

export function validatePolicy(v: unknown): RoutingPolicy {
  if (!ROUTING_POLICIES.includes(v as RoutingPolicy)) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `unknown routing policy ${String(v)} (expected ${ROUTING_POLICIES.join(", ")})`);
  }
  return v as RoutingPolicy;
}

/**
 * Picks a candidate index for a cache-blind policy. Round-robin advances only for a request that is booked, so
 * previews and query-only calls report the worker the next real request would get without skipping one.
 */
export class PolicyPicker {
  #next = 0;

  constructor(readonly policy: Exclude<RoutingPolicy, "kv">, private readonly rand: RandomSource) {}

  pick(ranks: readonly RankState[], willBook: boolean): number {
    const n = ranks.length;
    if (n === 1) return 0;
    switch (this.policy) {
      case "round_robin": {
        const i = this.#next % n;
        if (willBook) this.#next = (this.#next + 1) % 0x7fff_ffff;
        return i;
      }
      case "random":
        return Math.min(n - 1, Math.floor(this.rand() * n));
      case "least_loaded":
        return this.#leastLoaded(ranks);
    }
  }

  /**
   * Fewest in-flight requests, then fewest active blocks (a long prompt weighs more than a short one); remaining
   * ties are drawn uniformly (reservoir sampling), so equal workers share traffic instead of the first one taking it.
   */
  #leastLoaded(ranks: readonly RankState[]): number {
    let best = 0, ties = 1;
    for (let i = 1; i < ranks.length; i++) {
      const c = compareLoad(ranks[i]!, ranks[best]!);
      if (c < 0) {
        best = i;
        ties = 1;
      } else if (c === 0 && this.rand() * ++ties < 1) {
        best = i;
      }
    }
    return best;
  }
}

function compareLoad(a: RankState, b: RankState): number {
  return a.load.activeRequests - b.load.activeRequests || a.load.activeBlocks - b.load.activeBlocks;
}
