/**
 * @module Reads the Azure LLM inference trace 2023 (CSV `TIMESTAMP,ContextTokens,GeneratedTokens`, timestamps as
 * wall-clock text like `2023-11-16 18:17:03.9799600`). It has no prefix information, so every prompt is unique:
 * the trace tests load and burstiness, not cache affinity. Arrivals are made relative to the first row.
 */
import { readLines, type TextSource } from "./line-reader.ts";
import { traceError, uniqueSegment, type ReplayRequest, type TraceWindow } from "./replay-request.ts";
import type { ParsedTrace } from "./mooncake-trace.ts";

const COLUMNS = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"] as const;

/** `YYYY-MM-DD HH:MM:SS[.fraction]` (or with `T`) as UTC milliseconds, keeping the fraction's sub-ms digits. */
export function parseAzureTimestamp(text: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?Z?$/.exec(text.trim());
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac] = m;
  const ms = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s));
  return Number.isNaN(ms) ? undefined : ms + (frac ? Number(`0.${frac}`) * 1000 : 0);
}

function count(v: string | undefined, min: number): number | undefined {
  if (v === undefined || !/^\s*\d+\s*$/.test(v)) return undefined;
  const n = Number(v);
  return n >= min ? n : undefined;
}

export async function readAzureTrace(source: TextSource, window: TraceWindow): Promise<ParsedTrace> {
  const requests: ReplayRequest[] = [];
  let cols: number[] | undefined;
  let origin: number | undefined;
  let index = 0;
  for await (const line of readLines(source)) {
    if (line.text.trim() === "") continue;
    const cells = line.text.split(",");
    if (!cols) {
      const names = cells.map((c) => c.trim().replace(/^\uFEFF/, ""));
      cols = COLUMNS.map((c) => names.indexOf(c));
      const missing = COLUMNS.filter((_, i) => cols![i]! < 0);
      if (missing.length > 0) throw traceError(`line ${line.number}`, `the header lacks ${missing.join(", ")} (expected ${COLUMNS.join(",")})`);
      continue;
    }
    if (index >= window.end || requests.length >= window.limit) break;
    const where = `line ${line.number}`;
    const t = parseAzureTimestamp(cells[cols[0]!] ?? "");
    if (t === undefined) throw traceError(where, `bad TIMESTAMP ${JSON.stringify(cells[cols[0]!])}`);
    // The origin is the trace's first row, not the slice's, so a slice keeps its place in the hour.
    origin ??= t;
    if (index >= window.start) {
      const input = count(cells[cols[1]!], 1);
      if (input === undefined) throw traceError(where, "ContextTokens must be a positive integer");
      const output = count(cells[cols[2]!], 0);
      if (output === undefined) throw traceError(where, "GeneratedTokens must be a non-negative integer");
      requests.push({ index, at: Math.max(0, t - origin), inputLength: input, outputLength: output, segments: [uniqueSegment(index, input)] });
    }
    index++;
  }
  if (!cols) throw traceError("line 1", "empty CSV (no header)");
  return { requests, seen: index, notes: { shortHashIds: 0, extraHashIds: 0 } };
}
