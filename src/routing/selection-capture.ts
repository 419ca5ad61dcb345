/**
 * @module What a selection copies out of the score columns for the decision log and `x-kvgate-explain`: the candidates
 * table, and on request what a replay needs to re-run the choice (kept apart from the selector's allocation-free path).
 */
import { ScoreCol } from "../core/kv-index.ts";
import type { DecisionCandidate, DecisionInputs } from "./decision-record.ts";
import type { RoutingPolicy } from "./routing-policy.ts";
import type { RouteRequest } from "./routing-types.ts";
import type { RankState } from "./worker-registry.ts";

/** How much of the decision a selection copies out of the score columns (see DecisionDetail). */
export const Capture = { none: 0, candidates: 1, inputs: 2, inputsWithTokens: 3 } as const;
export type CaptureLevel = (typeof Capture)[keyof typeof Capture];

/** The candidates table of one selection (empty when pinned), and the replay inputs when asked for. */
export interface SelectionCapture {
  candidates: DecisionCandidate[];
  /** Index of the chosen rank in `candidates`; -1 when pinned. */
  chosen: number;
  inputs?: DecisionInputs;
}

/** The selection as the kernel and the tie-break left it. */
export interface CaptureSource {
  /** The score columns the kernel just used. */
  cols: { f64: Float64Array; base: number; stride: number };
  /** The candidates, in column order. */
  ranks: readonly RankState[];
  /** How many of them were scored, and which one was chosen. */
  n: number;
  chosen: number;
  /** A pinned rank was not chosen by cost. */
  pinned: boolean;
  level: CaptureLevel;
  policy: RoutingPolicy;
  overlapWeight: number;
  temperature: number;
  blockSize: number;
  eagle: boolean;
  kernelDraw: number;
  tie: "rendezvous" | "tree" | undefined;
  tieDraw: number;
  /** The prompt's sequence hashes as (lo, hi) pairs, the first `promptBlocks` of them read. */
  sequenceWords: () => Uint32Array;
  promptBlocks: number;
}

export function captureSelection(req: RouteRequest, s: CaptureSource): SelectionCapture {
  const { f64, base, stride } = s.cols;
  const col = (c: number) => base + c * stride;
  // A pinned rank was not chosen by cost: its table is empty (a replay has nothing to re-run but the hashes).
  const n = s.pinned ? 0 : s.n;
  const candidates: DecisionCandidate[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const r = s.ranks[i]!;
    candidates[i] = {
      worker: r.worker.id, dpRank: r.dpRank, overlapBlocks: f64[col(ScoreCol.overlap) + i]!, prefillTokens: f64[col(ScoreCol.prefill) + i]!,
      decodeBlocks: f64[col(ScoreCol.decode) + i]!, activeOverlapBlocks: f64[col(ScoreCol.activeOverlap) + i]!, cost: f64[col(ScoreCol.cost) + i]!,
    };
  }
  const chosen = s.pinned ? -1 : s.chosen;
  if (s.level !== Capture.inputs && s.level !== Capture.inputsWithTokens) return { candidates, chosen };
  const tree = new Array<number>(n);
  for (let i = 0; i < n; i++) tree[i] = f64[col(ScoreCol.tree) + i]!;
  const inputs: DecisionInputs = {
    policy: s.policy, overlapWeight: s.overlapWeight, temperature: s.temperature, blockSize: s.blockSize,
    draws: n === 0 ? [] : s.tie === "tree" ? [s.kernelDraw, s.tieDraw] : [s.kernelDraw], tree,
    sequenceWords: s.sequenceWords().slice(0, 2 * s.promptBlocks),
  };
  if (s.tie) inputs.tie = s.tie;
  if (req.lora !== undefined) inputs.lora = req.lora;
  if (req.namespace !== undefined) inputs.namespace = req.namespace;
  if (s.eagle) inputs.eagle = true;
  if (s.level === Capture.inputsWithTokens) inputs.tokens = req.tokens instanceof Uint32Array ? req.tokens.slice() : Uint32Array.from(req.tokens);
  return { candidates, chosen, inputs };
}
