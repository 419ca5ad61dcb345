/** @module Typed access to the WASM scoring kernel: worker costs and the argmin/softmax choice for one request. */
import { ScoreCol } from "../wasm/abi.ts";
import { KvgateError } from "./errors.ts";
import type { KvIndex } from "./kv-index.ts";

export interface ScoreCandidate {
  /** Cached prefix blocks of this request on the candidate (from find_matches). */
  overlapBlocks: number;
  /** Prefill tokens already booked on the candidate. */
  activePrefillTokens: number;
  /** Decode blocks already booked on the candidate. */
  activeDecodeBlocks: number;
  /** Blocks of this prompt already counted in activeDecodeBlocks (in-flight requests sharing the prefix). Default 0. */
  activeOverlapBlocks?: number;
  blockSize: number;
  /** Blocks the candidate holds in the index; fewer wins a cost tie. */
  treeSize: number;
}

export interface ScoreRequest {
  /** Request (prompt) length in tokens. */
  isl: number;
  /** Weight of prefill blocks against decode blocks. Default 1. */
  overlapWeight?: number;
  /** 0 picks the cheapest; > 0 samples a softmax over range-normalised costs. Default 0. */
  temperature?: number;
  /** Uniform draw in [0, 1) for tie-breaking or sampling (inject a seeded source for determinism). */
  rand: number;
}

export interface ScoreResult {
  /** Index of the chosen candidate. */
  chosen: number;
  costs: number[];
  potentialPrefillTokens: number[];
  potentialDecodeBlocks: number[];
}

/**
 * Cost per candidate = overlapWeight × (activePrefill + max(0, isl − overlap·bs)) / bs
 *                    + activeDecode + max(0, floor(isl / bs) − activeOverlap).
 */
export function scoreCandidates(index: KvIndex, candidates: readonly ScoreCandidate[], req: ScoreRequest): ScoreResult {
  const n = candidates.length;
  if (n === 0) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "no candidates to score");
  if (n > index.options.maxSlots) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `more than ${index.options.maxSlots} candidates`);
  const temperature = req.temperature ?? 0;
  if (!(temperature >= 0)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "temperature must be >= 0");
  const { f64, base, stride, run } = index.scoreColumns();
  const col = (c: number): number => base + c * stride;
  for (let i = 0; i < n; i++) {
    const c = candidates[i]!;
    f64[col(ScoreCol.overlap) + i] = c.overlapBlocks;
    f64[col(ScoreCol.prefill) + i] = c.activePrefillTokens;
    f64[col(ScoreCol.decode) + i] = c.activeDecodeBlocks;
    f64[col(ScoreCol.activeOverlap) + i] = c.activeOverlapBlocks ?? 0;
    f64[col(ScoreCol.blockSize) + i] = c.blockSize;
    f64[col(ScoreCol.tree) + i] = c.treeSize;
  }
  const chosen = run(n, req.isl, req.overlapWeight ?? 1, temperature, req.rand);
  if (chosen < 0) throw new KvgateError("KVGATE_ERR_STATE", `score kernel returned ${chosen}`);
  const read = (c: number): number[] => Array.from(f64.subarray(col(c), col(c) + n));
  return {
    chosen,
    costs: read(ScoreCol.cost),
    potentialPrefillTokens: read(ScoreCol.potentialPrefill),
    potentialDecodeBlocks: read(ScoreCol.potentialDecode),
  };
}
