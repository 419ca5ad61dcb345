/**
 * @module Sends one replayed request as a streaming `/v1/completions` call with a token-id prompt and measures what a
 * client sees: time to the first content chunk (TTFT), gaps between content chunks (ITL), time to the end of the
 * stream (E2E), and the usage the engine reports, including `prompt_tokens_details.cached_tokens`.
 */
import { SseSplitter } from "../gateway/sse-splitter.ts";
import { connectionRefused } from "./gateway-front.ts";

export interface CompletionRecord {
  index: number;
  /** Clock ms since the run started, when the request was sent. */
  sentAt: number;
  /** HTTP status (0 when the connection failed). */
  status: number;
  ttftMs?: number;
  e2eMs?: number;
  /** Mean and largest gap between content chunks after the first. */
  itlMeanMs?: number;
  itlMaxMs?: number;
  promptTokens: number;
  completionTokens?: number;
  cachedTokens?: number;
  /** The worker that served it, when the router says so in a response header. */
  worker?: string;
  /** The router's prediction (`x-kvgate-overlap-blocks: cached/total`): prompt blocks it expected cached, of all. */
  predictedBlocks?: number;
  /** Cached tokens the router expected the engine to report (`x-kvgate-expected-cached-tokens`), when it says. */
  predictedTokens?: number;
  promptBlocks?: number;
  error?: string;
  /** The connection was refused: the request never reached the server (a front may send it elsewhere). */
  refused?: boolean;
  /** The gateway that served it, when the replay fronts several (`--gateway`). */
  gateway?: string;
}

export interface CompletionCall {
  /** Base URL of the router (no trailing slash). */
  url: string;
  model: string;
  index: number;
  requestId: string;
  tokens: Uint32Array;
  maxTokens: number;
  /** Milliseconds; the scale the record's times are in. */
  now: () => number;
  runStart: number;
  fetch: typeof fetch;
  /** Every inter-chunk gap, for ITL percentiles over all tokens. */
  onGap?: (ms: number) => void;
  signal?: AbortSignal;
}

/** Response headers naming the worker (kvgate's gateway sets the first). */
export const WORKER_HEADERS = ["x-kvgate-worker", "x-worker-id"];

const utf8 = new TextEncoder();

/** ASCII digits of 0..999, three bytes each with leading zeros. */
const TRIPLES = (() => {
  const t = new Uint8Array(3000);
  for (let i = 0; i < 1000; i++) {
    t[3 * i] = 48 + ((i / 100) | 0);
    t[3 * i + 1] = 48 + (((i / 10) | 0) % 10);
    t[3 * i + 2] = 48 + (i % 10);
  }
  return t;
})();

/** Writes `v` (a u32) in decimal at `at`; returns the position after it. */
function writeUint(out: Uint8Array, at: number, v: number): number {
  if (v < 1000) {
    const skip = v < 10 ? 2 : v < 100 ? 1 : 0;
    for (let k = skip; k < 3; k++) out[at++] = TRIPLES[3 * v + k]!;
    return at;
  }
  const hi = Math.floor(v / 1000);
  at = writeUint(out, at, hi);
  const lo = 3 * (v - hi * 1000);
  out[at] = TRIPLES[lo]!;
  out[at + 1] = TRIPLES[lo + 1]!;
  out[at + 2] = TRIPLES[lo + 2]!;
  return at + 3;
}

/**
 * The JSON request body as bytes. The prompt dominates it (up to ~1 MB per request), so its digits are written
 * straight into one buffer from a lookup table: several times faster than `join` on a typed array.
 */
export function completionBody(model: string, tokens: Uint32Array, maxTokens: number): Uint8Array<ArrayBuffer> {
  const head = utf8.encode(`{"model":${JSON.stringify(model)},"prompt":[`);
  const tail = utf8.encode(`],"max_tokens":${maxTokens},"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"temperature":0}`);
  const out = new Uint8Array(head.length + tokens.length * 11 + tail.length);
  out.set(head);
  let at = head.length;
  for (let i = 0; i < tokens.length; i++) {
    if (i > 0) out[at++] = 44; // ","
    at = writeUint(out, at, tokens[i]!);
  }
  out.set(tail, at);
  return out.subarray(0, at + tail.length);
}

function contentOf(chunk: Record<string, unknown>): string {
  const c = (chunk.choices as Record<string, unknown>[] | undefined)?.[0];
  if (!c) return "";
  if (typeof c.text === "string") return c.text;
  const d = c.delta as Record<string, unknown> | undefined;
  return typeof d?.content === "string" ? d.content : "";
}

export async function sendCompletion(call: CompletionCall): Promise<CompletionRecord> {
  const t0 = call.now();
  const rec: CompletionRecord = { index: call.index, sentAt: t0 - call.runStart, status: 0, promptTokens: call.tokens.length };
  try {
    const res = await call.fetch(`${call.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": call.requestId },
      body: completionBody(call.model, call.tokens, call.maxTokens),
      signal: call.signal,
    });
    rec.status = res.status;
    rec.worker = WORKER_HEADERS.map((h) => res.headers.get(h)).find((v) => v) ?? undefined;
    const overlap = /^(\d+)\/(\d+)$/.exec(res.headers.get("x-kvgate-overlap-blocks") ?? "");
    if (overlap) [rec.predictedBlocks, rec.promptBlocks] = [Number(overlap[1]), Number(overlap[2])];
    const expected = Number(res.headers.get("x-kvgate-expected-cached-tokens") ?? NaN);
    if (Number.isFinite(expected)) rec.predictedTokens = expected;
    if (!res.ok || !res.body) {
      const text = await res.text().catch(() => "");
      rec.error = `HTTP ${res.status}: ${errorMessage(text)}`;
      return rec;
    }
    await readStream(res.body, call, t0, rec);
  } catch (e) {
    rec.error = (e as Error)?.message ?? String(e);
    if (rec.status === 0 && connectionRefused(e)) rec.refused = true;
  }
  return rec;
}

async function readStream(body: ReadableStream<Uint8Array>, call: CompletionCall, t0: number, rec: CompletionRecord): Promise<void> {
  const splitter = new SseSplitter();
  let last: number | undefined, chunks = 0, gapSum = 0, gapMax = 0, done = false;
  const reader = body.getReader();
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    const t = call.now();
    for (const ev of splitter.push(value)) {
      if (ev.data === undefined) continue;
      if (ev.data === "[DONE]") {
        done = true;
        continue;
      }
      const chunk = JSON.parse(ev.data) as Record<string, unknown>;
      if (chunk.error) rec.error = errorMessage(ev.data);
      const usage = chunk.usage as { completion_tokens?: number; prompt_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } } | undefined;
      if (usage) {
        rec.completionTokens = usage.completion_tokens;
        if (usage.prompt_tokens !== undefined) rec.promptTokens = usage.prompt_tokens;
        rec.cachedTokens = usage.prompt_tokens_details?.cached_tokens ?? 0;
      }
      if (contentOf(chunk) === "") continue;
      if (last === undefined) {
        rec.ttftMs = t - t0;
      } else {
        const gap = t - last;
        gapSum += gap;
        gapMax = Math.max(gapMax, gap);
        call.onGap?.(gap);
      }
      last = t;
      chunks++;
    }
  }
  rec.e2eMs = call.now() - t0;
  if (chunks > 1) {
    rec.itlMeanMs = gapSum / (chunks - 1);
    rec.itlMaxMs = gapMax;
  }
  if (!done && !rec.error) rec.error = "the stream ended without [DONE]";
}

function errorMessage(text: string): string {
  try {
    const e = (JSON.parse(text) as { error?: { message?: string } | string }).error;
    if (typeof e === "string") return e;
    if (e?.message) return e.message;
  } catch {
    // Not JSON: show the text itself.
  }
  return text.slice(0, 200);
}
