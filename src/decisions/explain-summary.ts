/**
 * @module What `kvgate explain` says about a decision log besides mismatches: how much of each prompt the chosen
 * worker held (overlap distribution), how often load overrode cache (the chosen worker held less of the prompt than
 * the best candidate), and each worker's share. Pure accumulation and text; the dashboard's figures are the same.
 */
import type { LoggedDecision } from "./decision-log-format.ts";
import type { Mismatch } from "./decision-replay.ts";

/** Buckets of the chosen worker's overlap as a share of the prompt's blocks. */
export const OVERLAP_BUCKETS = ["0%", "1-25%", "26-50%", "51-75%", "76-99%", "100%"] as const;

export interface ExplainSummary {
  decisions: number;
  /** Decisions with a candidates table (the rest were pinned: explicit target or session). */
  scored: number;
  mismatched: number;
  mismatches: Mismatch[];
  /** Among scored decisions with more than one candidate. */
  contested: number;
  /** Contested decisions whose chosen worker held fewer prompt blocks than the best candidate. */
  loadOverrodeCache: number;
  overlap: Record<(typeof OVERLAP_BUCKETS)[number], number>;
  meanOverlapBlocks: number;
  /** Σ cached tokens / Σ prompt tokens as predicted at routing time. */
  predictedHitRate: number;
  workers: Record<string, number>;
  policies: Record<string, number>;
}

export class SummaryBuilder {
  readonly #s: ExplainSummary = {
    decisions: 0, scored: 0, mismatched: 0, mismatches: [], contested: 0, loadOverrodeCache: 0,
    overlap: Object.fromEntries(OVERLAP_BUCKETS.map((b) => [b, 0])) as ExplainSummary["overlap"], meanOverlapBlocks: 0,
    predictedHitRate: 0, workers: {}, policies: {},
  };
  #overlapSum = 0;
  #cached = 0;
  #tokens = 0;

  constructor(private readonly keepMismatches = 1000) {}

  add(d: LoggedDecision, mismatches: readonly Mismatch[]): void {
    const s = this.#s;
    s.decisions++;
    if (mismatches.length > 0) {
      s.mismatched++;
      for (const m of mismatches) if (s.mismatches.length < this.keepMismatches) s.mismatches.push(m);
    }
    const w = `${d.worker}#${d.dp_rank}`;
    s.workers[w] = (s.workers[w] ?? 0) + 1;
    s.policies[d.policy] = (s.policies[d.policy] ?? 0) + 1;
    this.#overlapSum += d.overlap_blocks;
    this.#cached += Math.min(d.isl, d.overlap_blocks * d.block_size);
    this.#tokens += d.isl;
    s.overlap[bucket(d.overlap_blocks, d.prompt_blocks)]++;
    if (d.candidates.length === 0) return;
    s.scored++;
    if (d.candidates.length < 2) return;
    s.contested++;
    if (d.overlap_blocks < d.best_overlap_blocks) s.loadOverrodeCache++;
  }

  done(): ExplainSummary {
    const s = this.#s;
    s.meanOverlapBlocks = s.decisions > 0 ? this.#overlapSum / s.decisions : 0;
    s.predictedHitRate = this.#tokens > 0 ? this.#cached / this.#tokens : 0;
    return s;
  }
}

function bucket(overlap: number, blocks: number): (typeof OVERLAP_BUCKETS)[number] {
  if (overlap <= 0 || blocks <= 0) return "0%";
  const f = overlap / blocks;
  if (f >= 1) return "100%";
  if (f <= 0.25) return "1-25%";
  if (f <= 0.5) return "26-50%";
  if (f <= 0.75) return "51-75%";
  return "76-99%";
}

const pct = (x: number, of: number): string => (of > 0 ? `${((100 * x) / of).toFixed(1)}%` : "-");

/** The human-readable report. */
export function renderSummary(s: ExplainSummary, files: readonly string[]): string {
  const lines: string[] = [];
  lines.push(`kvgate explain: ${s.decisions} decisions from ${files.join(", ")}`);
  lines.push(s.mismatched === 0 ? "replayed through the WASM core: 0 mismatches" : `replayed through the WASM core: ${s.mismatched} decisions came out differently`);
  for (const m of s.mismatches) lines.push(`  MISMATCH ${m.where} request ${m.requestId}: ${m.field}: logged ${m.logged}, replayed ${m.replayed}`);
  if (s.mismatched > 0 && s.mismatches.length < s.mismatched) lines.push(`  … (first ${s.mismatches.length} shown)`);
  lines.push(`scored: ${s.scored} (pinned by target or session: ${s.decisions - s.scored}); policies: ${Object.entries(s.policies).map(([p, n]) => `${p} ${n}`).join(", ")}`);
  lines.push(`load overrode cache: ${s.loadOverrodeCache} of ${s.contested} contested decisions (${pct(s.loadOverrodeCache, s.contested)})`);
  lines.push(`predicted hit rate: ${(100 * s.predictedHitRate).toFixed(1)}%; mean overlap ${s.meanOverlapBlocks.toFixed(1)} blocks`);
  lines.push("chosen worker's overlap (share of the prompt's blocks):");
  for (const b of OVERLAP_BUCKETS) lines.push(`  ${b.padStart(7)}  ${String(s.overlap[b]).padStart(7)}  ${pct(s.overlap[b], s.decisions)}`);
  lines.push("per-worker share:");
  for (const [w, n] of Object.entries(s.workers).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))) {
    lines.push(`  ${w.padEnd(24)} ${String(n).padStart(7)}  ${pct(n, s.decisions)}`);
  }
  return lines.join("\n") + "\n";
}
