/**
 * @module One request of a replay, whatever its source (Mooncake trace, Azure trace, built-in generator): when it
 * arrives, how long its prompt and output are, and what its prompt is made of. Prompts are lists of content
 * segments, so requests that share leading segments share a token prefix (and therefore cached KV blocks).
 */
import { KvgateError } from "../core/errors.ts";

/** A run of synthetic tokens: the same id always yields the same tokens (see synthetic-tokens.ts). */
export interface Segment {
  /** Non-negative integer below 2^53; the token content is a function of (id, position in the segment). */
  id: number;
  /** Tokens taken from the start of the segment's content. */
  length: number;
}

export interface ReplayRequest {
  /** Position among the source's requests, 0-based (what `--slice` counts). */
  index: number;
  /** Arrival in ms since the trace's start (not yet divided by the speed-up). */
  at: number;
  /** Prompt tokens; equals the sum of segment lengths. */
  inputLength: number;
  /** Tokens to generate (at least 1 is sent: engines reject max_tokens 0). */
  outputLength: number;
  segments: Segment[];
  /** Conversation or agent-loop id (generator only; informational, routing does not use it). */
  session?: string;
}

/**
 * Ids at or above this are "unique" segments made for one request (Azure rows, prompt tails a trace does not cover);
 * trace hash ids must stay below it so the two kinds never collide.
 */
export const UNIQUE_SEGMENT_BASE = 2 ** 40;

/** A segment no other request shares. */
export function uniqueSegment(requestIndex: number, length: number, salt = 0): Segment {
  return { id: UNIQUE_SEGMENT_BASE + requestIndex * 4 + (salt & 3), length };
}

export function traceError(where: string, message: string): KvgateError {
  return new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${where}: ${message}`);
}

/** Requests between `start` (inclusive) and `end` (exclusive) of the source, at most `limit` of them. */
export interface TraceWindow {
  start: number;
  end: number;
  limit: number;
}

export const WHOLE_TRACE: TraceWindow = { start: 0, end: Infinity, limit: Infinity };

/** Parses `START:END` (either side may be empty; END exclusive). */
export function parseSlice(text: string): Pick<TraceWindow, "start" | "end"> {
  const m = /^\s*(\d*)\s*:\s*(\d*)\s*$/.exec(text);
  if (!m) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--slice must look like START:END, got ${JSON.stringify(text)}`);
  const start = m[1] === "" ? 0 : Number(m[1]);
  const end = m[2] === "" ? Infinity : Number(m[2]);
  if (!(end > start)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--slice ${text} selects no requests`);
  return { start, end };
}

/** Keeps the window's requests and orders them by arrival (stable, so same-time requests keep their order). */
export function applyWindow(all: readonly ReplayRequest[], w: TraceWindow): ReplayRequest[] {
  const picked = all.filter((r) => r.index >= w.start && r.index < w.end).slice(0, w.limit === Infinity ? undefined : w.limit);
  return picked.map((r, i) => ({ r, i })).sort((a, b) => a.r.at - b.r.at || a.i - b.i).map((x) => x.r);
}
