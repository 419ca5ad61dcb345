/**
 * @module The replay's HTML report: one self-contained page (inline CSS and SVG, no script, no network) with the
 * policy table, TTFT CDF per policy, actual hit rate over time, and per-worker load over time for every policy,
 * plus the data source and its license. Built from the result document alone, so it can be regenerated from JSON.
 */
import type { ReplayPolicy } from "./replay-policies.ts";
import type { PolicyResult, ReplayResults } from "./replay-results.ts";
import { describeFaults } from "./replay-faults.ts";
import { fmtPct, GATEWAY_HEADER, gatewayRows, PREDICTION_HEADER, predictionRows, RECOVERY_HEADER, recoveryRows, TABLE_HEADER, tableRows } from "./summary-table.ts";
import { escapeXml, lineChart, type Series } from "./svg-plot.ts";

export const POLICY_COLORS: Record<ReplayPolicy, string> = {
  round_robin: "#d62728", random: "#ff7f0e", least_loaded: "#9467bd", dynamo_approx: "#17becf", kv_approx: "#1f77b4",
  dynamo: "#8c564b", kv_events: "#2ca02c",
};

const WORKER_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

const pct = (v: number): string => `${Math.round(v * 100)}%`;

function ttftChart(policies: readonly PolicyResult[]): string {
  const series: Series[] = policies.map((p) => ({ name: p.label, color: POLICY_COLORS[p.policy], points: p.ttftCdf, step: true }));
  return lineChart(series, { id: "ttft-cdf", title: "TTFT CDF per policy", xLabel: "time to first token (engine ms, log scale)", yLabel: "fraction of requests", logX: true, yMin: 0, yMax: 1, yFormat: pct, width: 900, height: 380 });
}

function hitChart(policies: readonly PolicyResult[]): string {
  const series: Series[] = policies.map((p) => ({ name: p.label, color: POLICY_COLORS[p.policy], points: p.hitOverTime.map((b) => [b.t / 1000, b.rate] as const) }));
  return lineChart(series, { id: "hit-rate", title: "Actual prefix-cache hit rate over time (cached / prompt tokens, by send time)", xLabel: "engine seconds since start", yLabel: "hit rate", yMin: 0, yMax: 1, yFormat: pct, width: 900, height: 320 });
}

function loadChart(p: PolicyResult, yMax: number): string {
  const { workers, samples } = p.load;
  const series: Series[] = workers.map((w, i) => ({
    name: w, color: WORKER_COLORS[i % WORKER_COLORS.length]!, points: samples.map((s) => [s.t / 1000, (s.running[i] ?? NaN) + (s.waiting[i] ?? NaN)] as const),
  }));
  return lineChart(series, {
    id: `load-${p.policy}`, title: `${p.label}: requests on each engine (running + waiting)`, xLabel: "engine seconds since start",
    yLabel: "requests", yMin: 0, yMax, width: 520, height: 260, legend: workers.length <= 16,
  });
}

function table(policies: readonly PolicyResult[], ceiling: number): string {
  const head = TABLE_HEADER.map((h) => `<th>${escapeXml(h)}</th>`).join("");
  const body = tableRows(policies, ceiling).map((r, i) => `<tr><td><span class="sw" style="background:${POLICY_COLORS[policies[i]!.policy]}"></span>${escapeXml(policies[i]!.label)}</td>${r.slice(1).map((c) => `<td>${escapeXml(c)}</td>`).join("")}</tr>`).join("");
  return `<table data-table="policies"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

/** A table of text cells under its header, named for tests (`data-table`). */
function plainTable(name: string, header: readonly string[], rows: readonly (readonly string[])[]): string {
  const head = header.map((h) => `<th>${escapeXml(h)}</th>`).join("");
  const body = rows.map((r) => `<tr>${r.map((c) => `<td>${escapeXml(c)}</td>`).join("")}</tr>`).join("");
  return `<table data-table="${name}"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

function gatewayTable(policies: readonly PolicyResult[]): string {
  const rows = gatewayRows(policies);
  return rows.length === 0 ? "" : `<h2>Per gateway</h2>${plainTable("gateways", GATEWAY_HEADER, rows)}`;
}

function recoveryTable(policies: readonly PolicyResult[]): string {
  const rows = recoveryRows(policies);
  if (rows.length === 0) return "";
  const from = policies.find((p) => p.faultRecovery)!.faultRecovery!.from;
  return `<h2>Fault recovery</h2><p>Each policy also ran on the same requests without the faults. Hit rate over the requests from ${from} on (sent after the first fault struck), over the whole run, and the p99 TTFT of both runs.</p>`
    + plainTable("recovery", RECOVERY_HEADER, rows);
}

function predictionTable(policies: readonly PolicyResult[]): string {
  const rows = predictionRows(policies);
  return rows.length === 0 ? "" : `<h2>Predicted against reported, per worker</h2><p>What the router expected cached when it chose each worker, what the engine then reported, and how many requests carry the prediction: when a few long prompts do, one whose blocks were evicted while it queued (reported under half of the prediction: missed) moves the worker's figure by tens of percent.</p>`
    + plainTable("predictions", PREDICTION_HEADER, rows);
}

function setup(r: ReplayResults): string {
  const s = r.source, f = r.fleet;
  const slice = s.slice ? ` slice ${s.slice.start}:${s.slice.end ?? ""}${s.slice.limit !== null ? ` limit ${s.slice.limit}` : ""}` : "";
  const items = [
    `Requests: ${s.requests}${s.skipped ? ` (${s.skipped} left out: larger than one engine's KV cache)` : ""} from ${s.kind === "trace" ? `<code>${escapeXml(s.path ?? "")}</code> (${s.format})${escapeXml(slice)}` : "the built-in generator"}.`,
    `Source: ${escapeXml(s.citation)}.`,
    f.gateways
      ? `Through ${f.gateways.length} running gateway(s), round-robin: ${f.gateways.map((g) => `<code>${escapeXml(g)}</code>`).join(", ")}; their fleet as given: ${f.workers} engines, ${Object.entries(f.engine).map(([k, v]) => `${k} ${v}`).join(", ")}.`
      : `Fleet per policy: ${f.workers} simulated engines, ${Object.entries(f.engine).map(([k, v]) => `${k} ${v}`).join(", ")}; router queue ${f.routerQueue}.`,
    ...(f.faults && f.faults.length > 0 ? [`Faults, injected the same way into every policy's fleet: ${escapeXml(describeFaults(f.faults))}.`] : []),
    `Arrivals ${f.traceSpeedup}× faster than the trace; engines run ${f.engineSpeedup}× faster than wall time. All times are engine milliseconds (wall × ${f.engineSpeedup}).`,
    `Command: <code>${escapeXml(r.command)}</code>; generated ${escapeXml(r.createdAt)}.`,
  ];
  return `<ul>${items.map((i) => `<li>${i}</li>`).join("")}</ul>`;
}

export function renderReport(r: ReplayResults): string {
  let maxLoad = 1;
  for (const p of r.policies) for (const s of p.load.samples) for (let i = 0; i < s.running.length; i++) maxLoad = Math.max(maxLoad, (s.running[i] || 0) + (s.waiting[i] || 0));
  // One scale for every policy, with headroom, so the panels compare at a glance.
  const loads = r.policies.map((p) => `<div class="cell">${loadChart(p, Math.ceil(maxLoad * 1.1))}</div>`).join("");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kvgate replay report</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1600px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
.sw{display:inline-block;width:10px;height:10px;margin-right:6px}
.grid{display:flex;flex-wrap:wrap;gap:12px}.cell{border:1px solid #eee}
code{background:#f6f6f6;padding:1px 4px}
</style></head><body>
<h1>kvgate replay: routing policies compared</h1>
${setup(r)}
<h2>Per-policy results</h2>
${table(r.policies, r.ceiling.hitRate)}
${gatewayTable(r.policies)}
${recoveryTable(r.policies)}
${predictionTable(r.policies)}
<p>Hit rate = cached prompt tokens the engines reported (<code>usage.prompt_tokens_details.cached_tokens</code>) / prompt tokens. Of ceiling = the hit rate as a share of ${fmtPct(r.ceiling.hitRate)}, what one LRU cache of all ${r.ceiling.blocks.toLocaleString("en-US")} blocks would hit on the same requests (what a router should reach; LRU is not the best eviction, so good placement can beat it slightly)${r.cleanCeiling ? ` — the fleet as the faults left it; without them, ${r.cleanCeiling.blocks.toLocaleString("en-US")} blocks would hit ${fmtPct(r.cleanCeiling.hitRate)}` : ""}. Predicted hit = what the router expected when it chose. Ratios: round-robin's value / the policy's (higher is better).</p>
<h2>Time to first token</h2>
${ttftChart(r.policies)}
<h2>Cache hit rate over time</h2>
${hitChart(r.policies)}
<h2>Per-worker load over time</h2>
<div class="grid">${loads}</div>
</body></html>
`;
}
