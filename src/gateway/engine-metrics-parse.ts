/**
 * @module Reads the load gauges out of an engine's Prometheus /metrics text, for vLLM (V1 names, and the V0
 * `gpu_cache_usage_perc` as a fallback) and SGLang (engine-interop.md §7): requests running and waiting and KV-cache
 * usage, per data-parallel rank when a series carries an `engine` (vLLM) or `dp_rank` (SGLang) label.
 */

export interface EngineSample {
  running: number;
  waiting: number;
  /** 0..1 */
  kvUsage?: number;
}

/** Per rank label value; key -1 holds series without a rank label. */
export type EngineSamples = Map<number, EngineSample>;

type Field = "running" | "waiting" | "kvUsage" | "kvUsageOld";

const NAMES: Record<string, Field> = {
  "vllm:num_requests_running": "running",
  "vllm:num_requests_waiting": "waiting",
  "vllm:kv_cache_usage_perc": "kvUsage",
  "vllm:gpu_cache_usage_perc": "kvUsageOld",
  "sglang:num_running_reqs": "running",
  "sglang:num_queue_reqs": "waiting",
  "sglang:token_usage": "kvUsage",
};

const RANK_LABEL = /(?:^|,)\s*(?:engine|dp_rank)="(\d+)"/;

/** The load gauges found in `text`; an empty map when it holds none of them (not a vLLM or SGLang /metrics). */
export function parseEngineMetrics(text: string): EngineSamples {
  const acc = new Map<number, { running: number; waiting: number; kvUsage?: number; kvUsageOld?: number; seen: boolean }>();
  for (const line of text.split("\n")) {
    if (line.length === 0 || line.charCodeAt(0) === 35 /* # */) continue;
    const brace = line.indexOf("{");
    const space = line.indexOf(" ");
    if (space < 0) continue;
    const nameEnd = brace >= 0 && brace < space ? brace : space;
    const field = NAMES[line.slice(0, nameEnd)];
    if (!field) continue;
    let rank = -1;
    let rest = line.slice(nameEnd);
    if (rest.startsWith("{")) {
      const close = rest.indexOf("}");
      if (close < 0) continue;
      const m = RANK_LABEL.exec(rest.slice(1, close));
      if (m) rank = Number(m[1]);
      rest = rest.slice(close + 1);
    }
    const value = Number(rest.trim().split(/\s+/)[0]);
    if (!Number.isFinite(value)) continue;
    let a = acc.get(rank);
    if (!a) acc.set(rank, (a = { running: 0, waiting: 0, seen: false }));
    a.seen = true;
    // Several series per rank (one per model or LoRA): requests add up, usage is the highest.
    if (field === "running" || field === "waiting") a[field] += value;
    else a[field] = Math.max(a[field] ?? 0, value);
  }
  const out: EngineSamples = new Map();
  for (const [rank, a] of acc) {
    if (!a.seen) continue;
    const kvUsage = a.kvUsage ?? a.kvUsageOld;
    out.set(rank, { running: a.running, waiting: a.waiting, ...(kvUsage !== undefined ? { kvUsage: Math.min(1, Math.max(0, kvUsage)) } : {}) });
  }
  return out;
}
