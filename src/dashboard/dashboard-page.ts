/**
 * @module GET /dashboard: one self-contained HTML page — the bundled client and uPlot inline, no CDN, no other
 * request than /v1/stats — so every runtime serves it from the same generated module (`#dashboard-assets`).
 */
import { DASHBOARD_SCRIPT, DASHBOARD_STYLE, DASHBOARD_VERSION } from "#dashboard-assets";

/** A closing tag inside inline code would end the element early; `<\/` means the same to the JS and CSS parsers. */
const inline = (code: string, tag: string): string => code.replaceAll(`</${tag}`, `<\\/${tag}`);

const chart = (id: string, title: string): string => `<section><h2>${title}</h2><div class="chart" id="${id}" data-points="0"></div></section>`;

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>kvgate dashboard</title><link rel="icon" href="data:,">
<style>${inline(DASHBOARD_STYLE, "style")}</style></head>
<body data-polls="0">
<header><h1>kvgate</h1><span id="status" class="status">connecting…</span></header>
<form id="token-form" hidden><label>Admin token <input name="token" type="password" autocomplete="off"></label><button type="submit">Open</button></form>
<main>
<section class="wide"><h2>Workers</h2><div class="scroll"><table><thead><tr><th>worker</th><th>rank</th><th>health</th><th>role</th><th>in flight</th><th>active blocks</th><th>prefill tokens</th><th>cache usage</th><th>engine running / waiting</th><th>remote load</th><th>hits reported ÷ predicted</th><th>notes</th></tr></thead><tbody id="workers"></tbody></table></div></section>
${chart("chart-hit", "Hit rate: predicted vs engine-reported")}
${chart("chart-ttft", "Time to first token")}
${chart("chart-itl", "Inter-token latency")}
${chart("chart-queue", "Requests, queue depth and rejections")}
${chart("chart-kv", "KV-event ingest")}
<section><h2>Router and ingest</h2><dl class="totals" id="totals"></dl></section>
<section class="wide"><h2>Last decisions</h2><div class="scroll"><table><thead><tr><th>time</th><th>request</th><th>model</th><th>chosen</th><th>via</th><th>overlap</th><th>predicted hit</th><th>cost</th><th>candidates (cheapest first)</th></tr></thead><tbody id="decisions"><tr class="empty"><td colspan="9" class="muted">no decisions yet</td></tr></tbody></table></div></section>
</main>
<script>${inline(DASHBOARD_SCRIPT, "script")}</script>
</body></html>
`;

export const DASHBOARD_ETAG = `"kvgate-dashboard-${DASHBOARD_VERSION}"`;

export function dashboardResponse(ifNoneMatch: string | undefined): Response {
  const headers = {
    "content-type": "text/html; charset=utf-8", etag: DASHBOARD_ETAG, "cache-control": "no-cache",
    // Everything the page needs is inline; it talks only to its own origin.
    "content-security-policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
    "x-content-type-options": "nosniff",
  };
  if (ifNoneMatch === DASHBOARD_ETAG) return new Response(null, { status: 304, headers });
  return new Response(PAGE, { headers });
}
