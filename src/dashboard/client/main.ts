/**
 * @module The dashboard page's entry (bundled with uPlot by tools/build-dashboard.mjs): reads the admin token from
 * `?token=` or the session (asking for it when /v1/stats answers 401), polls the stats and redraws the panels.
 */
import { Charts } from "./charts.ts";
import { SeriesStore } from "./series-store.ts";
import { fetchStats } from "./stats-poller.ts";
import { renderDecisions, renderTotals, renderWorkers } from "./tables.ts";

const TOKEN_KEY = "kvgate.adminToken";
const params = new URLSearchParams(location.search);
/** Poll period (ms): ?poll= overrides the default, never below 250 ms. */
const pollMs = Math.max(250, Number(params.get("poll")) || 2_000);

function takeToken(): string | undefined {
  const fromUrl = params.get("token");
  if (fromUrl) {
    sessionStorage.setItem(TOKEN_KEY, fromUrl);
    // The token should not stay in the address bar, history or a shared screenshot.
    params.delete("token");
    history.replaceState(null, "", `${location.pathname}${params.size ? `?${params}` : ""}`);
    return fromUrl;
  }
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

const $ = (id: string): HTMLElement => document.getElementById(id)!;

let token = takeToken();
const store = new SeriesStore();
const charts = new Charts(document);
const status = $("status");
const tokenForm = $("token-form") as HTMLFormElement;

tokenForm.addEventListener("submit", (e) => {
  e.preventDefault();
  const v = (tokenForm.elements.namedItem("token") as HTMLInputElement).value.trim();
  if (!v) return;
  token = v;
  sessionStorage.setItem(TOKEN_KEY, v);
  tokenForm.hidden = true;
  void poll();
});
addEventListener("resize", () => charts.resize());

let timer: ReturnType<typeof setTimeout> | undefined;
let polls = 0;

async function poll(): Promise<void> {
  clearTimeout(timer);
  const r = await fetchStats(location.origin, token, store.since);
  if (r.kind === "unauthorized") {
    status.textContent = `admin token needed: ${r.message}`;
    status.className = "status bad";
    tokenForm.hidden = false;
    return;
  }
  if (r.kind === "error") {
    status.textContent = r.message;
    status.className = "status bad";
  } else {
    const s = r.stats;
    const offset = Date.now() - s.now;
    store.merge(s.series, s.now, s.window_ms);
    charts.update(store.series, offset);
    renderWorkers($("workers"), s.workers);
    renderTotals($("totals"), s);
    renderDecisions($("decisions"), s.decisions, offset);
    polls++;
    status.textContent = `live · ${s.workers.length} workers · interval ${s.interval_ms / 1000} s · updated ${new Date().toLocaleTimeString()}`;
    status.className = "status ok";
    document.body.dataset.polls = String(polls);
  }
  timer = setTimeout(() => void poll(), pollMs);
}

void poll();
