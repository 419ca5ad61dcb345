/**
 * @module The dashboard's time-series charts (uPlot, bundled into the page at build time): hit rate predicted vs
 * reported, TTFT and ITL p50/p99, queue depth with rejections and errors, KV-event ingest. Times are the gateway's
 * clock mapped to the browser's wall clock with the offset of the latest poll.
 */
import uPlot from "uplot";
import type { TimelineSeries } from "../../gateway/stats-timeline.ts";

type Column = keyof TimelineSeries;

interface LineSpec {
  column: Exclude<Column, "t">;
  label: string;
  stroke: string;
  scale?: string;
  dash?: number[];
}

export interface ChartSpec {
  id: string;
  lines: LineSpec[];
  /** Fixed y range (hit rates are 0..1). */
  range?: [number, number];
  /** Label of a second y axis on the right, for lines with scale "right". */
  right?: string;
  left: string;
}

export const CHARTS: readonly ChartSpec[] = [
  { id: "chart-hit", left: "hit rate", range: [0, 1], lines: [
    { column: "predicted_hit_rate", label: "predicted", stroke: "#2f6fde" },
    { column: "reported_hit_rate", label: "engine-reported", stroke: "#e0672b", dash: [5, 3] },
  ] },
  { id: "chart-ttft", left: "ms", lines: [
    { column: "ttft_p50_ms", label: "TTFT p50", stroke: "#2a9d5c" },
    { column: "ttft_p99_ms", label: "TTFT p99", stroke: "#2a9d5c", dash: [6, 4] },
  ] },
  { id: "chart-itl", left: "ms", lines: [
    { column: "itl_p50_ms", label: "ITL p50", stroke: "#8a4fd1" },
    { column: "itl_p99_ms", label: "ITL p99", stroke: "#8a4fd1", dash: [6, 4] },
  ] },
  { id: "chart-queue", left: "per interval", lines: [
    { column: "requests", label: "requests routed", stroke: "#777" },
    { column: "queue_depth_max", label: "queue depth (max)", stroke: "#2f6fde" },
    { column: "rejected", label: "rejected (429)", stroke: "#d33" },
    { column: "errors", label: "errors (5xx)", stroke: "#a0522d", dash: [4, 3] },
  ] },
  { id: "chart-kv", left: "events/s", right: "count", lines: [
    { column: "kv_events_per_s", label: "KV events/s", stroke: "#2f6fde" },
    { column: "kv_gaps", label: "gaps", stroke: "#d33", scale: "right" },
    { column: "cold_streams", label: "cold streams", stroke: "#e0a42b", scale: "right" },
  ] },
];

function options(spec: ChartSpec, width: number): uPlot.Options {
  const scales: uPlot.Scales = { x: { time: true } };
  if (spec.range) scales.y = { range: spec.range };
  const axes: uPlot.Axis[] = [{}, { label: spec.left, size: 56 }];
  if (spec.right) {
    scales.right = { range: (_u, _min, max) => [0, Math.max(1, max)] };
    axes.push({ scale: "right", side: 1, label: spec.right, grid: { show: false }, size: 48 });
  }
  return {
    width, height: 180, scales, axes, legend: { live: true },
    series: [{}, ...spec.lines.map((l) => ({
      label: l.label, stroke: l.stroke, width: 1.5, dash: l.dash, scale: l.scale ?? "y", spanGaps: true, points: { show: true, size: 4 },
    }))],
  };
}

export class Charts {
  readonly #plots = new Map<string, { spec: ChartSpec; plot: uPlot; el: HTMLElement }>();

  constructor(root: Document) {
    for (const spec of CHARTS) {
      const el = root.getElementById(spec.id);
      if (!el) continue;
      const plot = new uPlot(options(spec, this.#width(el)), [[], ...spec.lines.map(() => [])], el);
      this.#plots.set(spec.id, { spec, plot, el });
    }
  }

  #width(el: HTMLElement): number {
    return Math.max(280, Math.floor(el.clientWidth || 480));
  }

  /** Redraws every chart; `offsetMs` maps the gateway clock to the wall clock (Date.now() − stats.now). */
  update(s: Readonly<TimelineSeries>, offsetMs: number): void {
    const x = s.t.map((t) => (t + offsetMs) / 1000);
    for (const { spec, plot, el } of this.#plots.values()) {
      const ys = spec.lines.map((l) => s[l.column] as (number | null)[]);
      plot.setData([x, ...ys] as uPlot.AlignedData);
      // For tests and operators: how many intervals carry a value on this chart.
      el.dataset.points = String(Math.max(0, ...ys.map((y) => y.filter((v) => v !== null).length)));
    }
  }

  resize(): void {
    for (const { plot, el } of this.#plots.values()) plot.setSize({ width: this.#width(el), height: 180 });
  }
}
