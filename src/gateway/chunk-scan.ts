/**
 * @module Reads an ordinary token chunk of an OpenAI-style stream (one choice, text, no finish, no usage) in one
 * pass that hops from quote to quote, instead of JSON.parse and a walk of the objects it builds: the relay needs
 * only the generated text of such a chunk. Anything else — first, last, usage, error, tool calls, reasoning,
 * logprobs, several choices, or a shape it does not know — goes to inspectEvent (stream-events.ts), which parses
 * it whole, so the two give the same answer for every chunk the scan accepts.
 *
 * Why hopping is sound: outside strings a JSON text has no quote, and inside one every quote is escaped, so the
 * bare quotes split it into its strings exactly; a string followed by `:` is a key.
 */
import type { SseEvent } from "./sse-splitter.ts";
import { inspectEvent, type EventInfo } from "./stream-events.ts";

/** inspectEvent's answer for `ev`, parsing the JSON only when the chunk is not an ordinary token chunk. */
export function scanEvent(ev: SseEvent): EventInfo {
  const d = ev.data;
  if (d === undefined || d.charCodeAt(0) !== 123 /* { */) return inspectEvent(ev);
  return tokenChunk(d) ?? inspectEvent(ev);
}

/** Where the text's string literal sits in a chunk tokenChunk accepted: its opening and closing quotes. */
export interface TextSpan {
  open: number;
  close: number;
}

/**
 * scanEvent for one stream, remembering the last token chunk it accepted as a template: the text before its text
 * literal (up to the opening quote) and after it (from the closing quote). An engine sends every token of a stream
 * with the same id, created, model and shape, so a chunk that starts and ends as the template does, with plain text
 * between (no quote, backslash or control character), is the same JSON with another text: two comparisons instead of
 * a scan. Anything else is scanned, and a newly accepted chunk becomes the template.
 */
export class ChunkScanner {
  #prefix = "";
  #suffix = "";
  readonly #span: TextSpan = { open: -1, close: -1 };

  scan(ev: SseEvent): EventInfo {
    const d = ev.data;
    if (d === undefined || d.charCodeAt(0) !== 123 /* { */) return inspectEvent(ev);
    const p = this.#prefix, s = this.#suffix;
    if (p !== "" && d.length >= p.length + s.length && d.startsWith(p) && d.endsWith(s)) {
      const text = d.slice(p.length, d.length - s.length);
      if (text.indexOf('"') < 0 && text.indexOf("\\") < 0 && !CONTROL.test(text)) return tokenInfo(text);
    }
    const info = tokenChunk(d, this.#span);
    if (info === undefined) return inspectEvent(ev);
    this.#prefix = d.slice(0, this.#span.open + 1);
    this.#suffix = d.slice(this.#span.close);
    return info;
  }
}

function tokenInfo(text: string): EventInfo {
  return { kind: "chunk", text, output: text.length > 0, roleOnly: false, finish: false, usageOnly: false };
}

/** Keys that must be null in an ordinary token chunk, by length (one comparison per key instead of eight). */
const MUST_BE_NULL: (string[] | undefined)[] = [];
for (const k of ["usage", "error", "finish_reason", "tool_calls", "role", "reasoning_content", "reasoning", "logprobs"]) (MUST_BE_NULL[k.length] ??= []).push(k);
const CONTROL = /[\u0000-\u001f]/;
const QUOTE = 34, COLON = 58, BACKSLASH = 92;

/** The EventInfo of an ordinary token chunk, or undefined when `d` is anything else (or the scan is unsure). */
export function tokenChunk(d: string, span?: TextSpan): EventInfo | undefined {
  const n = d.length;
  if (d.charCodeAt(n - 1) !== 125 /* } */) return undefined;
  let text: string | undefined;
  let textKey = "";
  let choices = false;
  let delta = false;
  for (let q = d.indexOf('"'); q >= 0; q = d.indexOf('"', q + 1)) {
    const s = q + 1;
    q = stringEnd(d, s);
    if (q < 0) return undefined;
    let v = skipSpace(d, q + 1);
    if (d.charCodeAt(v) !== COLON) continue;
    v = skipSpace(d, v + 1);
    const len = q - s;
    if (isKey(d, s, len, "content") || isKey(d, s, len, "text")) {
      if (text !== undefined || d.charCodeAt(v) !== QUOTE) return undefined;
      const end = stringEnd(d, v + 1);
      if (end < 0) return undefined;
      text = stringValue(d, v, end);
      if (text === undefined) return undefined;
      if (span) {
        span.open = v;
        span.close = end;
      }
      textKey = len === 4 ? "text" : "content";
      q = end;
    } else if (isKey(d, s, len, "index")) {
      if (d.charCodeAt(v) !== 48 /* 0 */ || !closes(d, skipSpace(d, v + 1))) return undefined;
    } else if (isKey(d, s, len, "choices")) {
      if (d.charCodeAt(v) !== 91 /* [ */ || d.charCodeAt(skipSpace(d, v + 1)) !== 123) return undefined;
      choices = true;
    } else if (isKey(d, s, len, "delta")) {
      if (d.charCodeAt(v) !== 123) return undefined;
      delta = true;
    } else {
      for (const k of MUST_BE_NULL[len] ?? []) {
        if (isKey(d, s, len, k) && !(d.startsWith("null", v) && closes(d, skipSpace(d, v + 4)))) return undefined;
      }
    }
  }
  // Chat text lives in delta.content, completions text in choices[].text; any other mix is left to the parser.
  if (!choices || text === undefined || textKey !== (delta ? "content" : "text")) return undefined;
  return tokenInfo(text);
}

function isKey(d: string, s: number, len: number, name: string): boolean {
  return len === name.length && d.startsWith(name, s);
}

/** The index of the quote closing the string whose content starts at `s` (-1: unterminated). */
function stringEnd(d: string, s: number): number {
  for (let q = d.indexOf('"', s); q >= 0; q = d.indexOf('"', q + 1)) {
    let slashes = 0;
    while (d.charCodeAt(q - 1 - slashes) === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return q;
  }
  return -1;
}

/** The string literal from the quote at `open` to the one at `close`; undefined when it is not valid JSON. */
function stringValue(d: string, open: number, close: number): string | undefined {
  const raw = d.slice(open + 1, close);
  // Without escapes or control characters the literal is its own value; else JSON decides, as the parser would.
  if (raw.indexOf("\\") < 0 && !CONTROL.test(raw)) return raw;
  try {
    return JSON.parse(d.slice(open, close + 1)) as string;
  } catch {
    return undefined;
  }
}

function skipSpace(d: string, i: number): number {
  for (let c = d.charCodeAt(i); c === 32 || c === 10 || c === 13 || c === 9; c = d.charCodeAt(++i));
  return i;
}

/** A scalar value ends here: the next member or the end of its object or array. */
function closes(d: string, i: number): boolean {
  const c = d.charCodeAt(i);
  return c === 44 /* , */ || c === 125 /* } */ || c === 93 /* ] */;
}
