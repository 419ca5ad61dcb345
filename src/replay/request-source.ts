/**
 * @module Where a replay's requests come from (a trace file or URL in either format, or the built-in generator) and
 * which of them a fleet can serve: a request larger than one engine's KV cache could never run, so it is left out
 * for every policy alike and counted.
 */
import { KvgateError } from "../core/errors.ts";
import { readAzureTrace } from "./azure-trace.ts";
import { readMooncakeTrace, type ParsedTrace } from "./mooncake-trace.ts";
import type { ReplayConfig } from "./replay-args.ts";
import type { ReplayHost } from "./replay-host.ts";
import { CITATIONS, type SourceInfo } from "./replay-results.ts";
import { applyWindow, type ReplayRequest } from "./replay-request.ts";
import { generateWorkload } from "./workload-generator.ts";

export interface LoadedRequests {
  requests: ReplayRequest[];
  source: Omit<SourceInfo, "skipped" | "requests">;
}

export function traceFormat(path: string, explicit?: "mooncake" | "azure"): "mooncake" | "azure" {
  return explicit ?? (/\.csv(\?.*)?$/i.test(path) ? "azure" : "mooncake");
}

export async function loadRequests(cfg: Pick<ReplayConfig, "trace" | "format" | "window" | "generator">, host: Pick<ReplayHost, "open">): Promise<LoadedRequests> {
  if (!cfg.trace) {
    const requests = applyWindow(generateWorkload(cfg.generator), cfg.window);
    return { requests, source: { kind: "generator", citation: CITATIONS.generator, generator: { ...cfg.generator } } };
  }
  const format = traceFormat(cfg.trace, cfg.format);
  const stream = await host.open(cfg.trace);
  const parsed: ParsedTrace = format === "azure" ? await readAzureTrace(stream, cfg.window) : await readMooncakeTrace(stream, cfg.window);
  await stream.cancel().catch(() => undefined);
  if (parsed.requests.length === 0) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${cfg.trace}: no requests in the selected range (the trace has ${parsed.seen})`);
  }
  const w = cfg.window;
  return {
    requests: applyWindow(parsed.requests, { start: 0, end: Infinity, limit: Infinity }),
    source: {
      kind: "trace", path: cfg.trace, format, citation: CITATIONS[format], notes: parsed.notes,
      slice: { start: w.start, end: Number.isFinite(w.end) ? w.end : null, limit: Number.isFinite(w.limit) ? w.limit : null },
    },
  };
}

export interface FleetFit {
  kept: ReplayRequest[];
  skipped: number;
  maxModelLen: number;
}

/**
 * The context limit (the given one, or the longest request but at least 32,768) and the requests that fit both it
 * and one engine's cache (prompt + output − 1 tokens in whole blocks, the last sampled token is never cached).
 */
export function fitToFleet(requests: readonly ReplayRequest[], engine: { numGpuBlocks: number; blockSize: number; maxModelLen?: number }): FleetFit {
  const len = (r: ReplayRequest): number => r.inputLength + Math.max(1, r.outputLength);
  const maxModelLen = engine.maxModelLen ?? Math.max(32_768, ...requests.map(len));
  const kept = requests.filter((r) => len(r) <= maxModelLen && Math.ceil((len(r) - 1) / engine.blockSize) <= engine.numGpuBlocks);
  return { kept, skipped: requests.length - kept.length, maxModelLen };
}
