/** @module Rejects malformed route requests up front with a 400, before any state is touched. */
import { KvgateError } from "../core/errors.ts";
import type { RouteRequest } from "./routing-types.ts";

const PHASES = ["aggregated", "prefill", "decode"];

function bad(message: string): never {
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message);
}

export function validateRequest(req: RouteRequest): void {
  if (typeof req.requestId !== "string" || req.requestId.length === 0) bad("requestId must be a non-empty string");
  const t = req.tokens;
  if (!t || typeof t.length !== "number" || t.length < 1) bad("tokens must be a non-empty array of token ids");
  if (req.phase !== undefined && !PHASES.includes(req.phase)) bad(`unknown phase ${String(req.phase)}`);
  const o = req.overrides;
  if (o?.overlapWeight !== undefined && !(Number.isFinite(o.overlapWeight) && o.overlapWeight >= 0)) {
    bad(`overlap weight must be a finite number >= 0, got ${o.overlapWeight}`);
  }
  if (o?.temperature !== undefined && !(Number.isFinite(o.temperature) && o.temperature >= 0)) {
    bad(`temperature must be a finite number >= 0, got ${o.temperature}`);
  }
  if (req.priority !== undefined && !Number.isFinite(req.priority)) bad(`priority must be a finite number, got ${req.priority}`);
  if (req.target !== undefined) {
    if (typeof req.target.worker !== "string" || req.target.worker.length === 0) bad("target worker must be a non-empty string");
    const r = req.target.dpRank;
    if (r !== undefined && !(Number.isInteger(r) && r >= 0)) bad(`target dp rank must be a non-negative integer, got ${r}`);
  }
  if (req.exclude !== undefined && (!Array.isArray(req.exclude) || req.exclude.some((w) => typeof w !== "string"))) {
    bad("exclude must be an array of worker ids");
  }
}
