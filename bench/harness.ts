/**
 * @module Small measurement helper for kvgate's benchmarks (Node, Bun, Deno; no dependencies).
 *
 * A benchmark body is `fn(iters)`: it runs the operation `iters` times and returns a number that depends on the
 * work (a checksum), which is folded into a global sink so the engine cannot drop the work. The harness calibrates
 * `iters` so one sample takes ~20–50 ms, drops warm-up samples, and reports min / median / p99 time per operation.
 * Performance is measured, never asserted: callers print results as ratios against a baseline measured in the same
 * process, because the machine is shared and noisy.
 */
import { mkdirSync, writeFileSync } from "node:fs";

export type Body = (iters: number) => number;

export interface MeasureOptions {
  /** Operations per call of the body (e.g. blocks per prompt); per-op figures divide by iters × opsPerIter. */
  opsPerIter?: number;
  /** Target sample duration window in ms (calibration aims for the middle). Default [20, 50]. */
  sampleMs?: [number, number];
  /** Warm-up samples dropped. Default 3. */
  warmup?: number;
  /** Measured samples. Default 15. */
  samples?: number;
  /** Upper bound on the measured time of this item in ms (samples stop early past it, at least 3 kept). */
  budgetMs?: number;
  /** Fixed iterations per sample (skips calibration; for bodies whose one iteration is already long). */
  iters?: number;
}

export interface Measurement {
  name: string;
  /** ns per operation over the samples. */
  minNs: number;
  medianNs: number;
  p99Ns: number;
  meanNs: number;
  /** Operations per second at the median. */
  opsPerSec: number;
  samples: number;
  itersPerSample: number;
  opsPerIter: number;
}

let sink = 0;
/** The checksum of everything measured (print it once so no work is dead). */
export function sinkValue(): number {
  return sink;
}
export function consume(x: number): void {
  sink = (sink + (x | 0)) | 0;
}

export const now: () => number = typeof performance !== "undefined" ? () => performance.now() : () => Date.now();

/** Linear-interpolated percentile (p in 0..100) of numbers; `sorted` skips the sort. */
export function percentile(values: ArrayLike<number>, p: number, sorted = false): number {
  const n = values.length;
  if (n === 0) return NaN;
  const v = sorted ? values : Float64Array.from(values as ArrayLike<number>).sort();
  const rank = (Math.min(100, Math.max(0, p)) / 100) * (n - 1);
  const lo = Math.floor(rank), hi = Math.ceil(rank);
  return v[lo]! + (v[hi]! - v[lo]!) * (rank - lo);
}

function timeOnce(fn: Body, iters: number): number {
  const t0 = now();
  consume(fn(iters));
  return now() - t0;
}

/** Iterations so one call of `fn(iters)` lasts inside the window (doubling, then scaling to the middle). */
export function calibrate(fn: Body, window: [number, number] = [20, 50]): number {
  const [lo, hi] = window;
  const mid = (lo + hi) / 2;
  let iters = 1;
  for (let round = 0; round < 40; round++) {
    const ms = timeOnce(fn, iters);
    if (ms >= lo && ms <= hi) return iters;
    if (ms > hi) {
      if (iters === 1) return 1;
      iters = Math.max(1, Math.floor(iters * (mid / ms)));
      continue;
    }
    iters = ms < lo / 8 ? iters * 8 : Math.max(iters + 1, Math.ceil(iters * (mid / Math.max(ms, 1e-3))));
  }
  return iters;
}

/** Runs `fn` in calibrated samples and summarises the time per operation. */
export function measure(name: string, fn: Body, opts: MeasureOptions = {}): Measurement {
  const opsPerIter = opts.opsPerIter ?? 1;
  const iters = opts.iters ?? calibrate(fn, opts.sampleMs);
  const warmup = opts.warmup ?? 3;
  const want = opts.samples ?? 15;
  const budget = opts.budgetMs ?? Infinity;
  for (let i = 0; i < warmup; i++) timeOnce(fn, iters);
  const per = new Float64Array(want);
  let n = 0, spent = 0;
  while (n < want) {
    const ms = timeOnce(fn, iters);
    per[n++] = (ms * 1e6) / (iters * opsPerIter);
    spent += ms;
    if (n >= 3 && spent > budget) break;
  }
  return summarize(name, per.subarray(0, n).sort(), iters, opsPerIter);
}

/**
 * Several bodies measured sample by sample in turn (each calibrated and warmed up first), so a change in the machine's
 * speed during the run hits all of them alike and their ratios stay meaningful. Results in the order given.
 */
export function measureInterleaved(items: readonly { name: string; fn: Body; opts?: MeasureOptions }[], samples = 15): Measurement[] {
  const runs = items.map((it) => {
    const iters = it.opts?.iters ?? calibrate(it.fn, it.opts?.sampleMs);
    for (let i = 0; i < (it.opts?.warmup ?? 3); i++) timeOnce(it.fn, iters);
    return { it, iters, per: new Float64Array(samples) };
  });
  for (let n = 0; n < samples; n++) {
    for (const r of runs) r.per[n] = (timeOnce(r.it.fn, r.iters) * 1e6) / (r.iters * (r.it.opts?.opsPerIter ?? 1));
  }
  return runs.map(({ it, iters, per }) => summarize(it.name, per.sort(), iters, it.opts?.opsPerIter ?? 1));
}

function summarize(name: string, s: Float64Array, iters: number, opsPerIter: number): Measurement {
  const n = s.length;
  const median = percentile(s, 50, true);
  let sum = 0;
  for (let i = 0; i < n; i++) sum += s[i]!;
  return {
    name, minNs: s[0]!, medianNs: median, p99Ns: percentile(s, 99, true), meanNs: sum / n,
    opsPerSec: 1e9 / median, samples: n, itersPerSample: iters, opsPerIter,
  };
}

/** Human units for a duration in ns. */
export function fmtNs(ns: number): string {
  if (!Number.isFinite(ns)) return String(ns);
  if (ns < 1e3) return `${ns.toFixed(ns < 10 ? 2 : 1)} ns`;
  if (ns < 1e6) return `${(ns / 1e3).toFixed(2)} µs`;
  if (ns < 1e9) return `${(ns / 1e6).toFixed(2)} ms`;
  return `${(ns / 1e9).toFixed(2)} s`;
}

/** Human units for a rate. */
export function fmtRate(perSec: number, unit = "ops/s"): string {
  const u = unit ? ` ${unit}` : "";
  if (perSec >= 1e6) return `${(perSec / 1e6).toFixed(2)}M${u}`;
  if (perSec >= 1e3) return `${(perSec / 1e3).toFixed(1)}k${u}`;
  return `${perSec.toFixed(1)}${u}`;
}

export function fmtRatio(r: number): string {
  return `${r >= 100 ? r.toFixed(0) : r >= 10 ? r.toFixed(1) : r.toFixed(2)}×`;
}

/** One line: name, min / median / p99 per op. */
export function describe(m: Measurement, unit = "op"): string {
  return `${m.name.padEnd(58)} min ${fmtNs(m.minNs).padStart(10)}  med ${fmtNs(m.medianNs).padStart(10)}  p99 ${fmtNs(m.p99Ns).padStart(10)} /${unit}  (${m.samples}×${m.itersPerSample})`;
}

/** Prints rows as an aligned table. */
export function table(header: string[], rows: string[][]): string {
  const w = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(w[i]!) : c.padStart(w[i]!))).join("  ");
  return [line(header), w.map((n) => "-".repeat(n)).join("  "), ...rows.map(line)].join("\n");
}

/** Runtime facts recorded with each result file. */
export function environment(): Record<string, unknown> {
  const g = globalThis as { Bun?: { version: string }; Deno?: { version: { deno: string } }; process?: NodeJS.Process };
  return {
    runtime: g.Bun ? `bun ${g.Bun.version}` : g.Deno ? `deno ${g.Deno.version.deno}` : `node ${g.process?.version}`,
    platform: g.process ? `${g.process.platform}-${g.process.arch}` : "unknown",
    date: new Date().toISOString(),
  };
}

/** Writes `bench/results/<name>.json` (the directory is git-ignored and created on demand); returns the path. */
export function writeResults(name: string, data: unknown): string {
  const dir = new URL("./results/", import.meta.url);
  mkdirSync(dir, { recursive: true });
  const file = new URL(`${name}.json`, dir);
  const json = JSON.stringify({ bench: name, environment: environment(), ...(data as object) }, (_k, v) => (typeof v === "bigint" ? v.toString() : v), 2);
  writeFileSync(file, json + "\n");
  return file.pathname;
}
