/**
 * @module The policies a replay compares and how each maps onto the router: which selection policy, whether the
 * workers are registered with KV events (otherwise the router records its own decisions: approximate mode), and
 * whether the engines' events are fed to the router's index.
 */
import { KvgateError } from "../core/errors.ts";
import type { RoutingPolicy } from "../routing/index.ts";

export type ReplayPolicy = "round_robin" | "random" | "least_loaded" | "dynamo_approx" | "kv_approx" | "dynamo" | "kv_events";

/** Report order: the baselines first, round-robin (the reference for ratios) leading. */
export const REPLAY_POLICIES: readonly ReplayPolicy[] = ["round_robin", "random", "least_loaded", "dynamo_approx", "kv_approx", "dynamo", "kv_events"];

export interface PolicyWiring {
  routing: RoutingPolicy;
  /** WorkerSpec.kvEvents: false = approximate mode. */
  kvEvents: boolean;
  /** Apply the engines' KV events to the router's index. */
  applyEvents: boolean;
  /**
   * kvgate's own additions to the reference router: closed loop, decode-aware load, hot-prefix spreading (router
   * config closedLoop, decodeAware, hotPrefixSpread) and kvgate's overlap weight. Off reproduces the reference, which
   * never checks its predictions, counts prompt blocks only, scores every worker for every prompt, with weight 1.
   */
  closedLoop: boolean;
  label: string;
}

export const POLICY_WIRING: Record<ReplayPolicy, PolicyWiring> = {
  round_robin: { routing: "round_robin", kvEvents: true, applyEvents: false, closedLoop: false, label: "round-robin" },
  random: { routing: "random", kvEvents: true, applyEvents: false, closedLoop: false, label: "random" },
  least_loaded: { routing: "least_loaded", kvEvents: true, applyEvents: false, closedLoop: false, label: "least-loaded" },
  dynamo_approx: { routing: "kv", kvEvents: false, applyEvents: false, closedLoop: false, label: "dynamo approximate (open loop)" },
  kv_approx: { routing: "kv", kvEvents: false, applyEvents: false, closedLoop: true, label: "kv approximate (no events)" },
  dynamo: { routing: "kv", kvEvents: true, applyEvents: true, closedLoop: false, label: "dynamo (events, open loop)" },
  kv_events: { routing: "kv", kvEvents: true, applyEvents: true, closedLoop: true, label: "kv with events" },
};

/** Parses a comma-separated list (`all` = every policy), keeping report order and dropping duplicates. */
export function parsePolicies(text: string): ReplayPolicy[] {
  const names = text.split(",").map((s) => s.trim().replace(/-/g, "_")).filter((s) => s !== "");
  if (names.includes("all")) return [...REPLAY_POLICIES];
  for (const n of names) {
    if (!REPLAY_POLICIES.includes(n as ReplayPolicy)) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `unknown policy ${JSON.stringify(n)} (expected ${REPLAY_POLICIES.join(", ")} or all)`);
    }
  }
  if (names.length === 0) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "--policies lists no policy");
  return REPLAY_POLICIES.filter((p) => names.includes(p));
}
