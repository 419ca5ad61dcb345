/**
 * @module The documented per-request routing extension of an OpenAI-style body, and the session header, turned into
 * RouteRequest fields. Lives here (not in the gateway) so every transport reads the same fields the same way.
 *
 * Body field `kvgate` (all optional):
 *   overlap_weight: number >= 0     weight of prefill blocks against decode blocks (router default 1)
 *   temperature: number >= 0        0 = cheapest worker; > 0 samples a softmax over normalised costs
 *   priority: number                queue jump in seconds (FCFS/LCFS) or weight boost (WSPT)
 *   worker_id: string               explicit target; with dp_rank when the worker has several ranks
 *   dp_rank: integer >= 0
 *   exclude_workers: string[]       never choose these (retries)
 *   query_only: boolean             report the choice, book nothing
 * For clients written against Dynamo, `nvext.agent_hints.kv_overlap_score_weight` and `nvext.agent_hints.priority`
 * are read too; the `kvgate` field wins when both are present.
 */
import { KvgateError } from "../core/errors.ts";
import type { RouteRequest } from "./routing-types.ts";

export type RoutingExtension = Pick<RouteRequest, "overrides" | "priority" | "target" | "exclude" | "queryOnly">;

function bad(message: string): never {
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message);
}

function record(v: unknown, name: string): Record<string, unknown> | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v)) bad(`${name} must be an object`);
  return v as Record<string, unknown>;
}

function num(v: unknown, name: string, min = -Infinity): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || v < min) bad(`${name} must be a finite number${min > -Infinity ? ` >= ${min}` : ""}`);
  return v;
}

/** Reads the routing extension of a parsed request body; throws a 400 KvgateError on a malformed field. */
export function parseRoutingExtension(body: unknown): RoutingExtension {
  const root = record(body, "request body") ?? {};
  const ext = record(root.kvgate, "kvgate") ?? {};
  const hints = record(record(root.nvext, "nvext")?.agent_hints, "nvext.agent_hints") ?? {};
  const out: RoutingExtension = {};
  const overlapWeight = num(ext.overlap_weight, "kvgate.overlap_weight", 0) ?? num(hints.kv_overlap_score_weight, "nvext.agent_hints.kv_overlap_score_weight", 0);
  const temperature = num(ext.temperature, "kvgate.temperature", 0);
  if (overlapWeight !== undefined || temperature !== undefined) {
    out.overrides = {};
    if (overlapWeight !== undefined) out.overrides.overlapWeight = overlapWeight;
    if (temperature !== undefined) out.overrides.temperature = temperature;
  }
  const priority = num(ext.priority, "kvgate.priority") ?? num(hints.priority, "nvext.agent_hints.priority");
  if (priority !== undefined) out.priority = priority;
  if (ext.worker_id !== undefined) {
    if (typeof ext.worker_id !== "string" || ext.worker_id.length === 0) bad("kvgate.worker_id must be a non-empty string");
    const dpRank = num(ext.dp_rank, "kvgate.dp_rank", 0);
    if (dpRank !== undefined && !Number.isInteger(dpRank)) bad("kvgate.dp_rank must be an integer");
    out.target = dpRank === undefined ? { worker: ext.worker_id } : { worker: ext.worker_id, dpRank };
  } else if (ext.dp_rank !== undefined) {
    bad("kvgate.dp_rank needs kvgate.worker_id");
  }
  if (ext.exclude_workers !== undefined) {
    const ex = ext.exclude_workers;
    if (!Array.isArray(ex) || ex.some((w) => typeof w !== "string")) bad("kvgate.exclude_workers must be an array of worker ids");
    out.exclude = ex as string[];
  }
  if (ext.query_only !== undefined) {
    if (typeof ext.query_only !== "boolean") bad("kvgate.query_only must be a boolean");
    out.queryOnly = ext.query_only;
  }
  return out;
}

/** The session id from the configured header (Web-standard Headers), or undefined when absent or blank. */
export function sessionIdFrom(headers: Headers, headerName: string): string | undefined {
  const v = headers.get(headerName)?.trim();
  return v ? v : undefined;
}
