/** @module Reference of the scoring kernel: the default cost function and the argmin/softmax choice, in plain TS. */
import type { ScoreCandidate, ScoreRequest } from "../core/score-kernel.ts";

export function costReference(c: ScoreCandidate, isl: number, weight: number): number {
  const bs = Math.max(c.blockSize, 1);
  const prefill = c.activePrefillTokens + Math.max(0, isl - c.overlapBlocks * bs);
  const decode = c.activeDecodeBlocks + Math.max(0, Math.floor(isl / bs) - (c.activeOverlapBlocks ?? 0));
  return weight * (prefill / bs) + decode;
}

export function chooseReference(cands: readonly ScoreCandidate[], req: ScoreRequest): number {
  const costs = cands.map((c) => costReference(c, req.isl, req.overlapWeight ?? 1));
  const r = Math.min(Math.max(req.rand, 0), 1 - Number.EPSILON / 2);
  const cmin = Math.min(...costs), cmax = Math.max(...costs);
  const t = req.temperature ?? 0;
  if (t <= 0) {
    const tied = cands.map((c, i) => ({ i, tree: c.treeSize })).filter(({ i }) => costs[i] === cmin);
    const tmin = Math.min(...tied.map((x) => x.tree));
    const best = tied.filter((x) => x.tree === tmin);
    return best[Math.floor(r * best.length)]!.i;
  }
  if (cmax === cmin) return Math.floor(r * cands.length);
  const w = costs.map((c) => Math.exp(-(c - cmin) / ((cmax - cmin) * t)));
  const sum = w.reduce((a, b) => a + b, 0);
  let acc = 0;
  for (let i = 0; i < w.length; i++) {
    acc += w[i]!;
    if (r * sum < acc) return i;
  }
  return w.length - 1;
}
