/**
 * @module The replay's result document (written as JSON, read by the HTML report): where the requests came from
 * (with the data's source and license), the fleet and speed-ups, and per policy the summary, the curves the report
 * plots and every request's measurements. All times are engine milliseconds.
 */
import type { CompletionRecord } from "./completion-client.ts";
import type { LoadSample } from "./load-sampler.ts";
import type { PooledCeiling } from "./pooled-ceiling.ts";
import type { TraceNotes } from "./mooncake-trace.ts";
import type { FaultRecovery } from "./fault-recovery.ts";
import type { EventStats, PolicyRun } from "./policy-run.ts";
import type { ReplayFault } from "./replay-faults.ts";
import { POLICY_WIRING, type ReplayPolicy } from "./replay-policies.ts";
import type { ScheduleReport } from "./schedule.ts";
import { cdfPoints, hitRateOverTime, summarize, type HitBucket, type PolicySummary } from "./stats.ts";

export interface SourceInfo {
  kind: "trace" | "generator";
  path?: string;
  format?: "mooncake" | "azure";
  /** Where the data comes from and under which license (cite it wherever the results are shown). */
  citation: string;
  slice?: { start: number; end: number | null; limit: number | null };
  requests: number;
  /** Requests left out because they cannot fit one engine's KV cache (same set for every policy). */
  skipped: number;
  notes?: TraceNotes;
  generator?: Record<string, unknown>;
}

export interface FleetInfo {
  workers: number;
  model: string;
  engine: Record<string, number>;
  traceSpeedup: number;
  engineSpeedup: number;
  /** Router admission queue: off, so every policy hands requests to engines at once and engines queue them; or
   * whatever the gateways were started with (`--gateway`). */
  routerQueue: "off" | "gateways";
  /** `--gateway`: the running gateways the requests went to, round-robin (no fleet was started). */
  gateways?: string[];
  /** Faults injected into every policy's fleet (replay-faults.ts); absent or empty for a clean run. */
  faults?: ReplayFault[];
}

/** One gateway's part of a `--gateway` run. */
export interface GatewayShare {
  url: string;
  requests: number;
  errors: number;
  /** Engine-reported cached / prompt tokens of its completed requests. */
  hitRate: number;
  predictedHitRate: number;
}

export interface PolicyResult {
  policy: ReplayPolicy;
  label: string;
  summary: PolicySummary;
  /** Prompt tokens the router expected cached when it chose (from its response headers) / prompt tokens. */
  predictedHitRate: number;
  /** Predicted against engine-reported hit rate per worker (the closed loop's accuracy, worker by worker). */
  perWorker: WorkerHits[];
  schedule: ScheduleReport;
  events?: EventStats;
  /** The gateway's warnings during the run (first few). */
  log: string[];
  /** `--gateway` runs: per gateway, in the order given. */
  gateways?: GatewayShare[];
  /** `--faults` runs: the policy's figures beside its run without the faults. */
  faultRecovery?: FaultRecovery;
  ttftCdf: [number, number][];
  hitOverTime: HitBucket[];
  load: { workers: string[]; samples: LoadSample[] };
  requests: CompletionRecord[];
}

export interface ReplayResults {
  kind: "kvgate-replay";
  version: 1;
  createdAt: string;
  command: string;
  timeUnit: "engine ms";
  source: SourceInfo;
  fleet: FleetInfo;
  /** One pooled LRU cache of the fleet's blocks on the same requests: the hit rate a router should reach (pooled-ceiling.ts). */
  ceiling: PooledCeiling;
  /** When faults shrank an engine's cache: the ceiling of the fleet without them (the fault-free runs' ceiling). */
  cleanCeiling?: PooledCeiling;
  policies: PolicyResult[];
}

export const CITATIONS = {
  mooncake: "Mooncake FAST'25 trace format (kvcache-ai/Mooncake, FAST25-release/traces; Apache-2.0)",
  azure: "Azure LLM inference trace 2023 (Azure/AzurePublicDataset; CC-BY-4.0; Patel et al., Splitwise, ISCA 2024)",
  generator: "kvgate built-in seeded workload (multi-turn chats and agent loops sharing system prompts and tool definitions)",
} as const;

/** Hit-rate buckets: about 30 over the run, never shorter than 100 engine ms. */
function bucketFor(run: PolicyRun): number {
  const end = run.records.reduce((m, r) => Math.max(m, r.sentAt), 0);
  return Math.max(100, Math.ceil(end / 30));
}

/** Share of prompt tokens the router expected cached (its overlap blocks × block size); NaN when it never said. */
export function predictedHitRate(records: readonly CompletionRecord[], blockSize: number): number {
  let predicted = 0, prompt = 0;
  for (const r of records) {
    if (r.predictedBlocks === undefined || r.error) continue;
    predicted += Math.min(r.promptTokens, r.predictedTokens ?? r.predictedBlocks * blockSize);
    prompt += r.promptTokens;
  }
  return prompt > 0 ? predicted / prompt : NaN;
}

export interface WorkerHits {
  worker: string;
  requests: number;
  predictedHitRate: number;
  hitRate: number;
  /** (Absent in results written before they were counted.) Requests the router expected some cached tokens for: the few that carry a worker's predicted hit rate. */
  predictedRequests?: number;
  /** Of those, requests whose engine reported under half of what was predicted (their blocks were gone by then). */
  missedRequests?: number;
  /** Predicted tokens the missed requests did not get, as a share of the worker's predicted tokens. */
  missedShare?: number;
}

/** Per worker, over the successful requests that name it: predicted and reported cached tokens / prompt tokens. */
export function hitsPerWorker(records: readonly CompletionRecord[], blockSize: number): WorkerHits[] {
  const by = new Map<string, { requests: number; predicted: number; cached: number; prompt: number; hopeful: number; missed: number; lost: number }>();
  for (const r of records) {
    if (r.error || r.worker === undefined) continue;
    let w = by.get(r.worker);
    if (!w) by.set(r.worker, (w = { requests: 0, predicted: 0, cached: 0, prompt: 0, hopeful: 0, missed: 0, lost: 0 }));
    const cached = Math.min(r.promptTokens, r.cachedTokens ?? 0);
    const predicted = Math.min(r.promptTokens, r.predictedTokens ?? (r.predictedBlocks ?? 0) * blockSize);
    w.requests++;
    w.prompt += r.promptTokens;
    w.cached += cached;
    w.predicted += predicted;
    if (predicted > 0) w.hopeful++;
    if (predicted > 0 && cached < predicted / 2) {
      w.missed++;
      w.lost += predicted - cached;
    }
  }
  return [...by].sort(([a], [b]) => a.localeCompare(b, "en", { numeric: true })).map(([worker, w]) => ({
    worker, requests: w.requests, predictedHitRate: w.prompt > 0 ? w.predicted / w.prompt : NaN, hitRate: w.prompt > 0 ? w.cached / w.prompt : NaN,
    predictedRequests: w.hopeful, missedRequests: w.missed, missedShare: w.predicted > 0 ? w.lost / w.predicted : 0,
  }));
}

/** Per-gateway figures of a `--gateway` run, in the order of `urls`. */
export function gatewayShares(records: readonly CompletionRecord[], urls: readonly string[], blockSize: number): GatewayShare[] {
  return urls.map((url) => {
    const mine = records.filter((r) => r.gateway === url);
    const s = summarize(mine, []);
    return { url, requests: mine.length, errors: s.errors, hitRate: s.hitRate, predictedHitRate: predictedHitRate(mine, blockSize) };
  });
}

export function policyResult(run: PolicyRun, blockSize: number, gateways?: readonly string[]): PolicyResult {
  const ok = run.records.filter((r) => !r.error && r.ttftMs !== undefined);
  return {
    ...(gateways ? { gateways: gatewayShares(run.records, gateways, blockSize) } : {}),
    policy: run.policy, label: POLICY_WIRING[run.policy].label, summary: summarize(run.records, run.gaps),
    predictedHitRate: predictedHitRate(run.records, blockSize), perWorker: hitsPerWorker(run.records, blockSize), schedule: run.schedule, events: run.events, log: run.log,
    ttftCdf: cdfPoints(ok.map((r) => r.ttftMs!)), hitOverTime: hitRateOverTime(run.records, bucketFor(run)),
    load: { workers: run.workers, samples: run.load }, requests: run.records,
  };
}

/** Ratio of a baseline's number to a policy's (how many times better the policy is); NaN when undefined. */
export function improvement(baseline: number, value: number): number {
  return value > 0 && Number.isFinite(baseline) ? baseline / value : NaN;
}
