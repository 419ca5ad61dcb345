/**
 * @module `kvgate replay`: loads the requests, replays them once per policy on a fresh fleet, prints the comparison
 * table and writes the JSON result and the HTML report. Runtime services come from the host
 * (src/adapter/node/replay-host.ts on Node), so this module is Web-standard.
 */
import { KvgateError } from "../core/errors.ts";
import { runThroughGateways } from "./gateway-run.ts";
import { runPolicy, type FleetConfig, type PolicyRun } from "./policy-run.ts";
import { ProgressBar } from "./progress-bar.ts";
import { faultRecovery, firstFaultedRequest } from "./fault-recovery.ts";
import { describeFaults, engineBlocks } from "./replay-faults.ts";
import { parseReplayArgs, REPLAY_USAGE } from "./replay-args.ts";
import type { ReplayHost } from "./replay-host.ts";
import { policyResult, type PolicyResult, type ReplayResults } from "./replay-results.ts";
import { renderReport } from "./report-html.ts";
import { summarize } from "./stats.ts";
import { pooledLruCeiling } from "./pooled-ceiling.ts";
import { fitToFleet, loadRequests } from "./request-source.ts";
import { fmtMs, fmtPct, gatewayText, predicts, recoveryText, summaryText } from "./summary-table.ts";

export { REPLAY_USAGE } from "./replay-args.ts";

/** Runs the command; resolves to the exit code (0 also when some requests failed: the report says how many). */
export async function runReplayCommand(args: readonly string[], host: ReplayHost): Promise<number> {
  const cfg = parseReplayArgs(args);
  if (cfg.help) {
    host.stdout(`${REPLAY_USAGE}\n`);
    return 0;
  }
  const loaded = await loadRequests(cfg, host);
  const fit = fitToFleet(loaded.requests, cfg.engine);
  if (fit.kept.length === 0) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `none of the ${loaded.requests.length} requests fits one engine (${cfg.engine.numGpuBlocks} blocks of ${cfg.engine.blockSize} tokens); raise --num-gpu-blocks`);
  }
  const fleet: FleetConfig = { workers: cfg.workers, model: cfg.model, engine: { ...cfg.engine, maxModelLen: fit.maxModelLen } };
  const spanMs = fit.kept[fit.kept.length - 1]!.at - fit.kept[0]!.at;
  const engineSpan = spanMs / cfg.traceSpeedup;
  const sampleEveryMs = cfg.sampleEveryMs ?? Math.max(20, engineSpan / 200);
  const via = cfg.gateways.length > 0;
  host.stderr(`replay: ${fit.kept.length} requests${fit.skipped ? ` (${fit.skipped} too large for one engine, left out)` : ""}, ` +
    `${(spanMs / 1000).toFixed(1)} s of trace → ${(engineSpan / 1000).toFixed(1)} engine s → about ${(engineSpan / cfg.engineSpeedup / 1000).toFixed(1)} wall s per policy; ` +
    `${cfg.workers} engines × ${cfg.engine.numGpuBlocks} blocks of ${cfg.engine.blockSize} tokens` +
    `${via ? `, through ${cfg.gateways.length} running gateway${cfg.gateways.length > 1 ? "s" : ""} (round-robin)` : ""}\n`);
  const bar = new ProgressBar({ write: (t) => host.stderr(t), tty: host.stderrIsTTY, now: () => host.wall.now() });
  const common = { fleet, traceSpeedup: cfg.traceSpeedup, engineSpeedup: cfg.engineSpeedup, seed: cfg.seed, kvTuning: cfg.kvTuning, sampleEveryMs, host };
  if (cfg.faults.length > 0) host.stderr(`replay: faults: ${describeFaults(cfg.faults)}\n`);
  if (Object.keys(cfg.kvTuning).length > 0) host.stderr(`replay: kv policies changed from kvgate's defaults: ${JSON.stringify(cfg.kvTuning)}\n`);
  const gatewayCommon = { gateways: cfg.gateways, model: cfg.model, traceSpeedup: cfg.traceSpeedup, engineSpeedup: cfg.engineSpeedup, host };
  type Extra = Pick<Parameters<typeof runPolicy>[0], "faults" | "decisionLog">;
  const run1 = (policy: (typeof cfg.policies)[number], requests: typeof fit.kept, idPrefix: string, extra: Extra = {}): Promise<PolicyRun> => {
    const onProgress = cfg.progress ? (s: Parameters<typeof bar.update>[0]) => bar.update(s) : undefined;
    return via ? runThroughGateways({ ...gatewayCommon, policy, requests, idPrefix, onProgress }) : runPolicy({ ...common, ...extra, policy, requests, onProgress });
  };
  if (cfg.warmup > 0) {
    // The gateway and client code of this thread JIT-compile during the first run; a throwaway run keeps that
    // cost out of the first measured policy (each policy gets fresh engines anyway; through --gateway it does not).
    bar.start("warm-up");
    await run1("kv_events", fit.kept.slice(0, cfg.warmup), "warmup");
    if (cfg.progress) bar.finish(`${Math.min(cfg.warmup, fit.kept.length)} requests, not measured`);
  }
  const results: PolicyResult[] = [];
  // Faults injected by this process's fleet (not through --gateway): each policy also runs without them, first.
  const faultFrom = via || !cfg.faultBaseline ? undefined : firstFaultedRequest(cfg.faults, fit.kept.length);
  for (const policy of cfg.policies) {
    let clean: PolicyRun | undefined;
    if (faultFrom !== undefined) {
      bar.start(`${policy} (no fault)`);
      clean = await run1(policy, fit.kept, "gw");
      const s = summarize(clean.records, clean.gaps);
      if (cfg.progress) bar.finish(`TTFT mean ${fmtMs(s.ttftMs.mean)} ms, p99 ${fmtMs(s.ttftMs.p99)} ms, hit rate ${fmtPct(s.hitRate)}`);
    }
    bar.start(policy);
    const decisionLog = cfg.decisionLog ? { path: policyLogPath(cfg.decisionLog, policy), tokens: cfg.decisionLogTokens } : undefined;
    const run = await run1(policy, fit.kept, "gw", { faults: cfg.faults, decisionLog });
    const r = policyResult(run, cfg.engine.blockSize, via ? cfg.gateways : undefined);
    if (via) r.label = `${r.label} via ${cfg.gateways.length} gateway${cfg.gateways.length > 1 ? "s" : ""}`;
    if (clean && faultFrom !== undefined) r.faultRecovery = faultRecovery(clean.records, run.records, faultFrom);
    results.push(r);
    for (const line of r.log.slice(0, 5)) host.stderr(`${policy}: ${line}\n`);
    if (cfg.progress) {
      bar.finish(`TTFT mean ${fmtMs(r.summary.ttftMs.mean)} ms, p99 ${fmtMs(r.summary.ttftMs.p99)} ms, hit rate ${fmtPct(r.summary.hitRate)}` +
        `${r.summary.errors ? `, ${r.summary.errors} errors` : ""}; client late by ${fmtMs(r.schedule.meanLateMs)} ms on average`);
    }
  }
  const cleanBlocks = cfg.workers * cfg.engine.numGpuBlocks;
  let fleetBlocks = 0;
  for (let i = 0; i < cfg.workers; i++) fleetBlocks += via ? cfg.engine.numGpuBlocks : engineBlocks(cfg.faults, i, cfg.engine.numGpuBlocks);
  const doc: ReplayResults = {
    kind: "kvgate-replay", version: 1, createdAt: new Date().toISOString(), command: ["kvgate", "replay", ...args].join(" "),
    timeUnit: "engine ms", source: { ...loaded.source, requests: fit.kept.length, skipped: fit.skipped },
    fleet: {
      workers: cfg.workers, model: cfg.model, engine: { ...fleet.engine }, faults: cfg.faults, traceSpeedup: cfg.traceSpeedup, engineSpeedup: cfg.engineSpeedup,
      routerQueue: via ? "gateways" : "off", ...(via ? { gateways: [...cfg.gateways] } : {}),
    },
    // The fleet the policies ran on: an engine with a smaller cache (small_cache) shrinks what any router can reach.
    ceiling: pooledLruCeiling(fit.kept, cfg.engine.blockSize, fleetBlocks),
    ...(fleetBlocks !== cleanBlocks && faultFrom !== undefined ? { cleanCeiling: pooledLruCeiling(fit.kept, cfg.engine.blockSize, cleanBlocks) } : {}),
    policies: results,
  };
  await host.writeFile(cfg.jsonPath, JSON.stringify(doc));
  await host.writeFile(cfg.htmlPath, renderReport(doc));
  const clean = doc.cleanCeiling ? ` (without the faults, ${doc.cleanCeiling.blocks} blocks: ${fmtPct(doc.cleanCeiling.hitRate)})` : "";
  host.stdout(`${summaryText(results, doc.ceiling.hitRate)}${gatewayText(results)}${recoveryText(results)}ceiling (one LRU cache of all ${doc.ceiling.blocks} blocks): hit rate ` +
    `${fmtPct(doc.ceiling.hitRate)}${clean}; times in engine ms; source: ${doc.source.citation}\n${perWorkerText(results)}wrote ${cfg.jsonPath} and ${cfg.htmlPath}\n`);
  for (const r of results) {
    // Requests sent late mean this machine, not the fleet, was the bottleneck: latencies are inflated.
    if (r.schedule.meanLateMs > 0.05 * r.summary.ttftMs.mean) {
      host.stderr(`replay: warning: during ${r.policy} requests went out ${fmtMs(r.schedule.meanLateMs)} ms late on average ` +
        `(max ${fmtMs(r.schedule.maxLateMs)}): the machine was too busy; lower --sim-speedup for trustworthy numbers\n`);
    }
  }
  const failed = results.reduce((n, r) => n + r.summary.errors, 0);
  if (failed > 0) host.stderr(`replay: ${failed} requests failed; see the errors column and the JSON records\n`);
  return results.every((r) => r.summary.completed === 0) ? 1 : 0;
}

/** Predicted / engine-reported hit rate per worker, for the cache-aware policies (the others predict nothing). */
function perWorkerText(results: readonly PolicyResult[]): string {
  const rows = results.filter(predicts);
  return rows.map((r) => `${r.policy} predicted/reported hit rate per worker: ` +
    r.perWorker.map((w) => `${w.worker} ${fmtPct(w.predictedHitRate)}/${fmtPct(w.hitRate)}` +
      (w.predictedRequests !== undefined ? ` (${w.predictedRequests} predicted, ${w.missedRequests} missed)` : "")).join(", ") + "\n").join("");
}

/** decisions.jsonl → decisions.<policy>.jsonl (or FILE.<policy> without an extension). */
export function policyLogPath(path: string, policy: string): string {
  const slash = path.lastIndexOf("/"), dot = path.lastIndexOf(".");
  return dot > slash + 1 ? `${path.slice(0, dot)}.${policy}${path.slice(dot)}` : `${path}.${policy}`;
}
