/** @module Which (worker, rank) pairs a request may go to: role, model, health, exclusions, and explicit targets. */
import { KvgateError } from "../core/errors.ts";
import type { RouteRequest, WorkerRole, WorkerTarget } from "./routing-types.ts";
import { servesAdapter, type RankState, type WorkerRegistry } from "./worker-registry.ts";

export function phaseOf(req: RouteRequest): WorkerRole {
  return req.phase ?? "aggregated";
}

/** Healthy ranks of the request's phase serving its model, minus excluded workers. Shared array when nothing is excluded. */
export function eligibleRanks(registry: WorkerRegistry, req: RouteRequest): readonly RankState[] {
  const all = registry.eligible(req.model, phaseOf(req), req.lora);
  const ex = req.exclude;
  if (!ex || ex.length === 0) return all;
  return all.filter((r) => !ex.includes(r.worker.id));
}

export function noWorkers(req: RouteRequest): KvgateError {
  const adapter = req.lora === undefined ? "" : ` with adapter ${req.lora}`;
  const what = `${phaseOf(req)} workers${req.model === undefined ? "" : ` serving ${req.model}`}${adapter}`;
  const excluded = req.exclude && req.exclude.length > 0 ? ` (excluding ${req.exclude.join(", ")})` : "";
  return new KvgateError("KVGATE_ERR_NO_WORKERS", `no healthy ${what}${excluded}`, { model: req.model, phase: phaseOf(req) });
}

/**
 * Resolves an explicit target to one rank. The rank may be omitted only when the worker has exactly one: rank 0 is
 * not a default, because on a data-parallel worker silently picking it would defeat the caller's intent.
 */
export function resolveTarget(registry: WorkerRegistry, req: RouteRequest, target: WorkerTarget): RankState {
  const w = registry.require(target.worker);
  const role = phaseOf(req);
  if (w.role !== role) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${w.id} is a ${w.role} worker, the request needs ${role}`, { worker: w.id });
  }
  if (req.model !== undefined && !w.models.includes(req.model)) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${w.id} does not serve ${req.model}`, { worker: w.id });
  }
  if (!servesAdapter(w, req.lora)) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${w.id} does not serve adapter ${req.lora}`, { worker: w.id });
  }
  if (req.exclude?.includes(w.id)) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${w.id} is both targeted and excluded`, { worker: w.id });
  }
  let rank: RankState | undefined;
  if (target.dpRank === undefined) {
    if (w.ranks.length !== 1) {
      const span = `${w.ranks[0]!.dpRank}..${w.ranks[w.ranks.length - 1]!.dpRank}`;
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${w.id} has ${w.ranks.length} dp ranks (${span}); name one`, { worker: w.id });
    }
    rank = w.ranks[0];
  } else {
    rank = w.ranks.find((r) => r.dpRank === target.dpRank);
    if (!rank) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${w.id} has no dp rank ${target.dpRank}`, { worker: w.id, dpRank: target.dpRank });
    }
  }
  if (w.health !== "healthy") {
    throw new KvgateError("KVGATE_ERR_NO_WORKERS", `worker ${w.id} is ${w.health}`, { worker: w.id, health: w.health });
  }
  return rank!;
}
