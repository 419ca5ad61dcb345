/**
 * @module Reads Mooncake FAST'25 traces (JSON Lines: `timestamp` ms, `input_length`, `output_length`, `hash_ids`,
 * one id per 512-token block, the last block possibly partial so `len(hash_ids) == ceil(input_length / 512)`).
 * Each hash id becomes a 512-token segment, so requests with equal leading ids share a token prefix. Traces that
 * give fewer ids than blocks (the `input_length // 512` convention) get a per-request tail for the uncovered tokens.
 */
import { readLines, type TextSource } from "./line-reader.ts";
import { traceError, uniqueSegment, UNIQUE_SEGMENT_BASE, type ReplayRequest, type Segment, type TraceWindow } from "./replay-request.ts";

/** Tokens per hash id in the FAST'25 traces. */
export const MOONCAKE_BLOCK_TOKENS = 512;

export interface TraceNotes {
  /** Requests whose ids covered fewer blocks than the prompt has (a unique tail was added). */
  shortHashIds: number;
  /** Requests with more ids than blocks (the extra ids were ignored). */
  extraHashIds: number;
}

export interface ParsedTrace {
  requests: ReplayRequest[];
  /** Requests in the source (all of them when it was read to the end; a lower bound when reading stopped early). */
  seen: number;
  notes: TraceNotes;
}

function int(v: unknown, min: number): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= min;
}

/** One record; `index` is its position among the trace's requests. */
export function parseMooncakeRecord(text: string, index: number, where: string, notes: TraceNotes, blockTokens = MOONCAKE_BLOCK_TOKENS): ReplayRequest {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw traceError(where, `not JSON (${(e as Error).message})`);
  }
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) throw traceError(where, "a record must be a JSON object");
  const r = raw as Record<string, unknown>;
  if (typeof r.timestamp !== "number" || !Number.isFinite(r.timestamp) || r.timestamp < 0) throw traceError(where, "timestamp must be a non-negative number of ms");
  if (!int(r.input_length, 1)) throw traceError(where, "input_length must be a positive integer");
  if (!int(r.output_length, 0)) throw traceError(where, "output_length must be a non-negative integer");
  const ids = r.hash_ids;
  if (!Array.isArray(ids)) throw traceError(where, "hash_ids must be a list");
  const input = r.input_length;
  const blocks = Math.ceil(input / blockTokens);
  const segments: Segment[] = [];
  const covered = Math.min(blocks, ids.length);
  for (let k = 0; k < covered; k++) {
    const id = ids[k];
    if (!int(id, 0) || id >= UNIQUE_SEGMENT_BASE) throw traceError(where, `hash_ids[${k}] must be an integer in 0..2^40`);
    segments.push({ id, length: Math.min(blockTokens, input - k * blockTokens) });
  }
  if (ids.length > blocks) notes.extraHashIds++;
  if (covered < blocks) {
    notes.shortHashIds++;
    segments.push(uniqueSegment(index, input - covered * blockTokens));
  }
  return { index, at: r.timestamp, inputLength: input, outputLength: r.output_length, segments };
}

/** Reads the window's requests; stops reading once past the window's end. */
export async function readMooncakeTrace(source: TextSource, window: TraceWindow, blockTokens = MOONCAKE_BLOCK_TOKENS): Promise<ParsedTrace> {
  const notes: TraceNotes = { shortHashIds: 0, extraHashIds: 0 };
  const requests: ReplayRequest[] = [];
  let index = 0;
  for await (const line of readLines(source)) {
    if (line.text.trim() === "") continue;
    if (index >= window.end || requests.length >= window.limit) break;
    if (index >= window.start) requests.push(parseMooncakeRecord(line.text, index, `line ${line.number}`, notes, blockTokens));
    index++;
  }
  return { requests, seen: index, notes };
}
