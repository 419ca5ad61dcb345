/**
 * @module Line charts as inline SVG strings, so the HTML report is one self-contained file that any browser opens
 * from disk with no script and no network: axes with round-number ticks (linear or log-10), one polyline per series,
 * a legend. Each chart carries `data-plot` and each line `data-series` so tests can find them.
 */

export interface Series {
  name: string;
  color: string;
  points: readonly (readonly [number, number])[];
  /** Draw as steps (empirical CDFs). */
  step?: boolean;
}

export interface ChartOptions {
  id: string;
  title: string;
  xLabel: string;
  yLabel: string;
  width?: number;
  height?: number;
  logX?: boolean;
  xMin?: number;
  xMax?: number;
  yMin?: number;
  yMax?: number;
  /** Formats y tick labels (default: compact number). */
  yFormat?: (v: number) => string;
  legend?: boolean;
}

export function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

/** Compact tick label: 0.5, 12, 1.5k, 2M. */
export function compact(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return `${+v.toFixed(a < 1 && a > 0 ? 2 : 1)}`;
}

/** Round-number ticks (1, 2, 5 × 10^k steps) covering [lo, hi]. */
export function linearTicks(lo: number, hi: number, target = 6): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / target;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw)!;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

/** Powers of ten within [lo, hi] (lo > 0). */
export function logTicks(lo: number, hi: number): number[] {
  const out: number[] = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    const v = 10 ** e;
    if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
  }
  return out;
}

export function lineChart(series: readonly Series[], o: ChartOptions): string {
  const W = o.width ?? 640, H = o.height ?? 320;
  // The legend sits right of the plot, so it never hides a line.
  const legendWidth = o.legend === false || series.length === 0 ? 0 : 34 + 6.2 * Math.max(...series.map((s) => s.name.length));
  const m = { l: 58, r: 14 + legendWidth, t: 30, b: 44 };
  const pw = W - m.l - m.r, ph = H - m.t - m.b;
  const xs = series.flatMap((s) => s.points.map((p) => p[0])).filter((x) => Number.isFinite(x) && (!o.logX || x > 0));
  const ys = series.flatMap((s) => s.points.map((p) => p[1])).filter(Number.isFinite);
  let x0 = o.xMin ?? (xs.length ? Math.min(...xs) : 0), x1 = o.xMax ?? (xs.length ? Math.max(...xs) : 1);
  let y0 = o.yMin ?? Math.min(0, ...ys), y1 = o.yMax ?? (ys.length ? Math.max(...ys) : 1);
  if (o.logX) {
    x0 = Math.max(x0, 1e-3);
    x0 = 10 ** Math.floor(Math.log10(x0));
    x1 = 10 ** Math.ceil(Math.log10(Math.max(x1, x0 * 10)));
  }
  if (!(x1 > x0)) x1 = x0 + 1;
  if (!(y1 > y0)) y1 = y0 + 1;
  const fx = (x: number): number => m.l + (o.logX ? (Math.log10(x) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0)) : (x - x0) / (x1 - x0)) * pw;
  const fy = (y: number): number => m.t + ph - ((y - y0) / (y1 - y0)) * ph;
  const yf = o.yFormat ?? compact;
  const parts: string[] = [];
  parts.push(`<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" fill="#fff" stroke="#bbb"/>`);
  for (const t of o.logX ? logTicks(x0, x1) : linearTicks(x0, x1)) {
    const x = fx(t).toFixed(1);
    parts.push(`<line x1="${x}" x2="${x}" y1="${m.t}" y2="${m.t + ph}" stroke="#eee"/><text x="${x}" y="${m.t + ph + 16}" text-anchor="middle">${escapeXml(compact(t))}</text>`);
  }
  for (const t of linearTicks(y0, y1, 5)) {
    const y = fy(t).toFixed(1);
    parts.push(`<line x1="${m.l}" x2="${m.l + pw}" y1="${y}" y2="${y}" stroke="#eee"/><text x="${m.l - 6}" y="${y}" dy="4" text-anchor="end">${escapeXml(yf(t))}</text>`);
  }
  for (const s of series) {
    const pts: string[] = [];
    let prevY: number | undefined;
    for (const [x, y] of s.points) {
      if (!Number.isFinite(x) || !Number.isFinite(y) || (o.logX && x <= 0)) continue;
      const px = Math.min(m.l + pw, Math.max(m.l, fx(x))), py = fy(Math.min(y1, Math.max(y0, y)));
      if (s.step && prevY !== undefined) pts.push(`${px.toFixed(1)},${prevY.toFixed(1)}`);
      pts.push(`${px.toFixed(1)},${py.toFixed(1)}`);
      prevY = py;
    }
    parts.push(`<polyline data-series="${escapeXml(s.name)}" fill="none" stroke="${s.color}" stroke-width="1.6" points="${pts.join(" ")}"/>`);
  }
  if (legendWidth > 0) {
    const x = m.l + pw + 12;
    series.forEach((s, i) => {
      const y = m.t + 10 + i * 15;
      parts.push(`<line x1="${x}" x2="${x + 20}" y1="${y - 4}" y2="${y - 4}" stroke="${s.color}" stroke-width="3"/><text x="${x + 26}" y="${y}">${escapeXml(s.name)}</text>`);
    });
  }
  parts.push(`<text x="${m.l + pw / 2}" y="${H - 8}" text-anchor="middle">${escapeXml(o.xLabel)}</text>`);
  parts.push(`<text transform="translate(14 ${m.t + ph / 2}) rotate(-90)" text-anchor="middle">${escapeXml(o.yLabel)}</text>`);
  parts.push(`<text x="${m.l}" y="18" font-weight="bold">${escapeXml(o.title)}</text>`);
  return `<svg xmlns="http://www.w3.org/2000/svg" data-plot="${escapeXml(o.id)}" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">${parts.join("")}</svg>`;
}
