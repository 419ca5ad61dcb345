/**
 * @module The per-policy comparison as rows of cells, shared by the terminal table the command prints and the HTML
 * report's table, so both always show the same numbers. Ratios are against round-robin when it ran.
 */
import { POLICY_WIRING } from "./replay-policies.ts";
import { improvement, type PolicyResult } from "./replay-results.ts";

export const TABLE_HEADER = [
  "policy", "requests", "errors", "TTFT mean", "TTFT p50", "TTFT p90", "TTFT p99", "ITL mean", "ITL p99", "E2E mean", "E2E p99",
  "hit rate", "of ceiling", "predicted hit", "mean TTFT vs RR", "p99 TTFT vs RR",
];

/** Milliseconds with sensible precision: 0.42, 12.3, 1,234. */
export function fmtMs(v: number): string {
  if (!Number.isFinite(v)) return "-";
  if (v < 10) return v.toFixed(2);
  if (v < 100) return v.toFixed(1);
  return Math.round(v).toLocaleString("en-US");
}

export function fmtPct(v: number): string {
  return Number.isFinite(v) ? `${(v * 100).toFixed(1)}%` : "-";
}

export function fmtRatio(v: number): string {
  return Number.isFinite(v) ? `${v.toFixed(2)}x` : "-";
}

/** `ceiling`: the pooled-cache hit rate (pooled-ceiling.ts); each policy's hit rate is also shown as a share of it. */
export function tableRows(policies: readonly PolicyResult[], ceiling: number): string[][] {
  const rr = policies.find((p) => p.policy === "round_robin")?.summary;
  return policies.map((p) => {
    const s = p.summary;
    return [
      p.policy, String(s.requests), String(s.errors), fmtMs(s.ttftMs.mean), fmtMs(s.ttftMs.p50), fmtMs(s.ttftMs.p90), fmtMs(s.ttftMs.p99),
      fmtMs(s.itlMs.mean), fmtMs(s.itlMs.p99), fmtMs(s.e2eMs.mean), fmtMs(s.e2eMs.p99), fmtPct(s.hitRate),
      ceiling > 0 ? fmtPct(s.hitRate / ceiling) : "-",
      POLICY_WIRING[p.policy].routing === "kv" ? fmtPct(p.predictedHitRate) : "-",
      rr ? fmtRatio(improvement(rr.ttftMs.mean, s.ttftMs.mean)) : "-", rr ? fmtRatio(improvement(rr.ttftMs.p99, s.ttftMs.p99)) : "-",
    ];
  });
}

/** A plain-text table with right-aligned numbers (the first column left-aligned). */
export function textTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n") + "\n";
}

export function summaryText(policies: readonly PolicyResult[], ceiling: number): string {
  return textTable(TABLE_HEADER, tableRows(policies, ceiling));
}

export const GATEWAY_HEADER = ["gateway", "requests", "errors", "hit rate", "predicted hit"];

/** Per-gateway rows of `--gateway` runs (policy and gateway in the first column). */
export function gatewayRows(policies: readonly PolicyResult[]): string[][] {
  return policies.flatMap((p) => (p.gateways ?? []).map((g) => [
    policies.length > 1 ? `${p.policy} ${g.url}` : g.url, String(g.requests), String(g.errors), fmtPct(g.hitRate), fmtPct(g.predictedHitRate),
  ]));
}

/** The per-gateway table, or nothing when no policy ran through gateways. */
export function gatewayText(policies: readonly PolicyResult[]): string {
  const rows = gatewayRows(policies);
  return rows.length > 0 ? `\n${textTable(GATEWAY_HEADER, rows)}\n` : "";
}

export const RECOVERY_HEADER = [
  "policy", "hit after fault: clean", "with fault", "share", "whole run: clean", "with fault", "share", "TTFT p99: clean", "with fault",
];

/** Rows for the policies that also ran without the faults (fault-recovery.ts). */
export function recoveryRows(policies: readonly PolicyResult[]): string[][] {
  return policies.flatMap((p) => {
    const r = p.faultRecovery;
    if (!r) return [];
    return [[
      p.policy, fmtPct(r.clean.hitRateAfter), fmtPct(r.faulted.hitRateAfter), fmtPct(r.shareAfter), fmtPct(r.clean.hitRate), fmtPct(r.faulted.hitRate),
      fmtPct(r.share), fmtMs(r.clean.ttftP99Ms), fmtMs(r.faulted.ttftP99Ms),
    ]];
  });
}

/** The recovery table, or nothing when no policy ran beside a fault-free twin. */
export function recoveryText(policies: readonly PolicyResult[]): string {
  const rows = recoveryRows(policies);
  if (rows.length === 0) return "";
  const from = policies.find((p) => p.faultRecovery)!.faultRecovery!.from;
  return `
fault recovery: each policy also ran without the faults; hit rate over requests ${from}.. (after the first fault) and the whole run
${textTable(RECOVERY_HEADER, rows)}
`;
}

export const PREDICTION_HEADER = ["policy", "worker", "requests", "predicted hit", "reported hit", "predicted to hit", "missed", "predicted tokens missed"];

/** A cache-aware policy that predicted some hit: the per-worker prediction figures (table and terminal) describe it. */
export function predicts(p: PolicyResult): boolean {
  return POLICY_WIRING[p.policy].routing === "kv" && p.perWorker.some((w) => w.predictedHitRate > 0);
}

/**
 * Per worker of the cache-aware policies: predicted against reported hit rate, and how many requests carry the
 * prediction. A request counts as missed when its engine reported under half of what the router expected.
 */
export function predictionRows(policies: readonly PolicyResult[]): string[][] {
  return policies.filter(predicts).flatMap((p) => p.perWorker.map((w) => [
    p.policy, w.worker, String(w.requests), fmtPct(w.predictedHitRate), fmtPct(w.hitRate), String(w.predictedRequests ?? "-"),
    String(w.missedRequests ?? "-"), w.missedShare === undefined ? "-" : fmtPct(w.missedShare),
  ]));
}
