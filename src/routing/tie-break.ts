/**
 * @module The selector's rules for a tie on the lowest cost at temperature 0, apart from the selector so that
 * `kvgate explain` re-runs a logged decision through the very same rules: a cold tie goes by rendezvous hash of the
 * prompt's first block, a warm tie runs the kernel again with the tied ranks' tree sizes.
 */
import { KvgateError } from "../core/errors.ts";
import { ScoreCol, type ScoreColumns } from "../core/kv-index.ts";

/** What the tie rules read beyond the score columns; the live selector and the offline replay each implement it. */
export interface TieInputs {
  /** Blocks candidate `i` holds in the index (read for tied candidates only). */
  treeSize(i: number): number;
  /** Candidate `i`'s rendezvous key (rankKeyOf its worker and rank). */
  rankKey(i: number): number;
  /** The prompt's sequence hashes as (lo, hi) u32 words; only the first block's are read. */
  firstBlockWords(): Uint32Array;
  /** The next uniform draw in [0, 1). */
  draw(): number;
  /** Told which rule settled the tie. */
  tied(kind: "rendezvous" | "tree"): void;
}

/**
 * Ranks sharing the lowest cost. A cold prefix (nothing cached on any of them) goes to the tied rank that wins a
 * rendezvous hash of the prompt's first block: replicas that have not heard of each other's decisions yet still
 * send a new prefix to the same worker, and later prompts with that prefix follow it there. A warm tie reads the
 * tied ranks' tree sizes (through the slot map's string keys, ~70 ns each, so only then) and runs the kernel again
 * on the same columns: the others cost more, so their tree entries do not matter, and the kernel's own tie rule
 * applies (smallest tree, then the random draw).
 */
export function breakTies(cols: ScoreColumns, n: number, chosen: number, isl: number, weight: number, promptBlocks: number, src: TieInputs): number {
  const { f64, base, stride, run } = cols;
  const costCol = base + ScoreCol.cost * stride, treeCol = base + ScoreCol.tree * stride, overlapCol = base + ScoreCol.overlap * stride;
  const min = f64[costCol + chosen]!;
  let ties = 0, cold = true;
  for (let i = 0; i < n; i++) {
    if (f64[costCol + i] !== min) continue;
    ties++;
    if (f64[overlapCol + i] !== 0) cold = false;
  }
  if (ties < 2) return chosen;
  if (cold && promptBlocks > 0) {
    src.tied("rendezvous");
    const keys = src.firstBlockWords();
    const lo = keys[0]!, hi = keys[1]!;
    let best = -1, bestWeight = -1;
    for (let i = 0; i < n; i++) {
      if (f64[costCol + i] !== min) continue;
      const w = rendezvousWeight(lo, hi, src.rankKey(i));
      if (w > bestWeight) {
        bestWeight = w;
        best = i;
      }
    }
    return best;
  }
  src.tied("tree");
  for (let i = 0; i < n; i++) if (f64[costCol + i] === min) f64[treeCol + i] = src.treeSize(i);
  const again = run(n, isl, weight, 0, src.draw());
  if (again < 0 || again >= n) throw new KvgateError("KVGATE_ERR_STATE", `score kernel returned ${again}`);
  return again;
}

/** A rank's rendezvous identity: FNV-1a of "worker#rank", the same on every replica. */
export function rankKeyOf(worker: string, dpRank: number): number {
  const s = `${worker}#${dpRank}`;
  let k = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) k = Math.imul(k ^ s.charCodeAt(i), 0x01000193);
  return k >>> 0;
}

/** murmur3's 32-bit finalizer over the block hash and the rank key: uniform, so each rank wins 1/n of new prefixes. */
export function rendezvousWeight(lo: number, hi: number, key: number): number {
  let h = Math.imul(lo ^ key, 0x85ebca6b) ^ hi;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h ^ key, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
