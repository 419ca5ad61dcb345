/**
 * @module The prefill busy probe disaggregated serving asks before sending a prompt to the prefill pool: would it land
 * on a worker loaded above t × its batch capacity? Advisory; books nothing.
 */
import { KvgateError } from "../core/errors.ts";
import { prefillTokensOf, saturated } from "./busy-policy.ts";
import { DEFAULT_MAX_BATCHED_TOKENS } from "./router-config.ts";
import { validateRequest } from "./request-validation.ts";
import type { Pending, RoutingCore } from "./routing-core.ts";
import type { RouteRequest } from "./routing-types.ts";

export interface PrefillProbe {
  busy: boolean;
  /** all_busy: every prefill worker over a busy threshold; saturated: a request would be queued; load: chosen worker over t. */
  reason: "all_busy" | "saturated" | "load" | "idle";
  worker?: string;
  dpRank?: number;
  activePrefillTokens?: number;
  /** Prefill tokens the chosen worker takes per batch (max batched tokens, or the large default when unknown). */
  capacity?: number;
}

export async function probePrefill(core: RoutingCore, req: RouteRequest, threshold: number): Promise<PrefillProbe> {
  if (!(threshold >= 0)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `threshold must be >= 0, got ${threshold}`);
  const probe: RouteRequest = { ...req, phase: "prefill", queryOnly: true };
  validateRequest(probe);
  const p: Pending = { req: probe, startedAt: core.now(), bindAtBook: false };
  await core.enterSession(p, true);
  let r;
  try {
    r = core.resolve(p);
  } catch (e) {
    if (e instanceof KvgateError && e.code === "KVGATE_ERR_ALL_WORKERS_BUSY") return { busy: true, reason: "all_busy" };
    throw e;
  }
  if (saturated(r.pinned ? [r.pinned] : r.candidates, core.config.queueThreshold)) return { busy: true, reason: "saturated" };
  const { selection } = core.selectOnly(p, r);
  const rank = selection.rank;
  const capacity = rank.worker.maxBatchedTokens ?? DEFAULT_MAX_BATCHED_TOKENS;
  // Peers' prefill on the worker counts too: the probe asks whether the engine is loaded, not this replica.
  const active = prefillTokensOf(rank);
  const busy = active > threshold * capacity;
  return { busy, reason: busy ? "load" : "idle", worker: rank.worker.id, dpRank: rank.dpRank, activePrefillTokens: active, capacity };
}
