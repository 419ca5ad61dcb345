/**
 * @module The dashboard's tables and tiles, built with DOM nodes and textContent (worker ids and model names come
 * from configuration and requests, so nothing is parsed as HTML): workers with each rank's load, cache usage and the
 * closed loop's verdict, router and ingest totals, and the last decisions with every candidate.
 */
import type { DecisionStats, StatsBody, WorkerStats } from "../../gateway/stats-snapshot.ts";

/** Rows the decisions table keeps, newest first. */
export const DECISION_ROWS = 25;

function el<K extends keyof HTMLElementTagNameMap>(tag: K, text?: string | number, cls?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells: (string | number | HTMLElement)[], cls?: string): HTMLTableRowElement {
  const tr = el("tr", undefined, cls);
  for (const c of cells) {
    const td = el("td");
    if (c instanceof HTMLElement) td.append(c);
    else td.textContent = String(c);
    tr.append(td);
  }
  return tr;
}

const pct = (v: number | null): string => (v === null ? "–" : `${(v * 100).toFixed(1)}%`);
const num = (v: number): string => (Number.isInteger(v) ? String(v) : v.toFixed(2));

function healthBadge(w: WorkerStats): HTMLElement {
  const state = w.unreachable ? "unreachable" : w.health;
  const b = el("span", state, `badge badge-${state}`);
  if (w.circuit && w.circuit !== "closed") b.textContent += ` (circuit ${w.circuit})`;
  return b;
}

export function renderWorkers(tbody: HTMLElement, workers: readonly WorkerStats[]): void {
  const rows: HTMLTableRowElement[] = [];
  for (const w of workers) {
    const flags = [w.kv_events ? "KV events" : "approximate", w.cold ? "cold" : "", w.engine_metrics_stale ? "metrics stale" : ""].filter(Boolean).join(", ");
    for (const r of w.ranks) {
      const usage = r.cache_usage === null ? "–" : `${pct(r.cache_usage)}${r.cache_usage_source === "router" ? " (est.)" : ""}`;
      const engine = r.engine ? `${r.engine.running} / ${r.engine.waiting}` : "–";
      const remote = r.remote.requests > 0 ? `${r.remote.requests} req, ${r.remote.prefill_tokens} tok, ${r.remote.blocks} blk` : "–";
      const p = r.prediction;
      const loop = p === null || p.samples === 0 ? "–" : `${num(p.ratio)} (${p.samples} answers)`;
      // The closed loop's verdicts on this rank: what an operator should look into.
      const notes = [flags, p?.flagged ? "index distrusted" : "", p?.blind ? "KV events not arriving: routed as approximate" : "",
        p?.capacity_blocks != null ? `cache modelled at ${p.capacity_blocks} blocks` : ""].filter(Boolean).join(", ");
      rows.push(row([w.id, r.dp_rank, healthBadge(w), w.role, r.active_requests, r.active_blocks, r.active_prefill_tokens, usage, engine, remote, loop, notes],
        w.cold || p?.blind ? "cold" : undefined));
    }
  }
  if (rows.length === 0) rows.push(row(["no workers yet"], "empty"));
  tbody.replaceChildren(...rows);
}

export function renderTotals(dl: HTMLElement, s: StatsBody): void {
  const items: [string, string | number][] = [
    ["queue depth", s.router.queue_depth], ["live bookings", s.router.live_bookings], ["open plans", s.router.open_plans],
    ["sessions", s.router.sessions], ["index entries", s.router.index_entries], ["KV streams", s.kv_events.streams],
    ["cold streams", s.kv_events.cold_streams], ["KV events", s.kv_events.events], ["KV gaps", s.kv_events.gaps],
    ["cold marks", s.kv_events.cold_marks], ["events dropped", s.kv_events.dropped],
  ];
  dl.replaceChildren(...items.flatMap(([k, v]) => [el("dt", k), el("dd", v)]));
}

function candidates(d: DecisionStats): HTMLElement {
  if (d.candidates.length === 0) return el("span", `not scored (${d.via})`, "muted");
  const t = el("table", undefined, "candidates");
  t.append(row(["worker", "overlap", "active overlap", "prefill tok", "decode blk", "cost"], "head"));
  for (const c of [...d.candidates].sort((a, b) => a.cost - b.cost)) {
    t.append(row([`${c.worker}:${c.dp_rank}`, c.overlap_blocks, c.active_overlap_blocks, c.prefill_tokens, c.decode_blocks, num(c.cost)], c.chosen ? "chosen" : undefined));
  }
  return t;
}

/** Adds the decisions not shown yet (by request id and time) on top, keeping DECISION_ROWS. */
export function renderDecisions(tbody: HTMLElement, decisions: readonly DecisionStats[], offsetMs: number): void {
  const seen = new Set(Array.from(tbody.querySelectorAll<HTMLElement>("tr[data-key]"), (r) => r.dataset.key));
  const fresh: HTMLTableRowElement[] = [];
  for (const d of decisions) {
    const key = `${d.request_id}@${d.at}`;
    if (seen.has(key)) continue;
    const when = new Date(d.at + offsetMs).toLocaleTimeString();
    const tr = row([when, d.request_id, d.model, `${d.worker}:${d.dp_rank}`, d.via, `${d.overlap_blocks}/${d.prompt_blocks}`, pct(d.predicted_hit_rate), num(d.cost), candidates(d)]);
    tr.dataset.key = key;
    fresh.push(tr);
  }
  if (fresh.length === 0) return;
  tbody.querySelector("tr.empty")?.remove();
  tbody.prepend(...fresh);
  const all = tbody.querySelectorAll("tr[data-key]");
  for (let i = DECISION_ROWS; i < all.length; i++) all[i]!.remove();
}
