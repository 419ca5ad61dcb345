/**
 * @module Reads an ordinary token chunk of an OpenAI-style stream (one choice, text, no finish, no usage) by
 * searching its text for a few keys instead of JSON.parse: the relay needs only the generated text of such a
 * chunk. Any other chunk — first, last, usage, error, tool calls, reasoning, several choices — goes to
 * inspectEvent (stream-events.ts), which parses it whole, so the two agree on every chunk they both read.
 *
 * Why a key search is sound: a quote inside a JSON string is always escaped, so `"name":` with both quotes
 * bare only occurs as an object key; its absence anywhere in the text proves the object has no such key.
 */
import type { SseEvent } from "./sse-splitter.ts";
import { inspectEvent, type EventInfo } from "./stream-events.ts";

/** Keys whose presence (with a value other than null) needs the full reading. */
const NEEDS_PARSE = ['"usage":{', '"tool_calls":[', '"role":"', '"reasoning_content":"', '"reasoning":"'];

/** inspectEvent's answer for `ev`, parsing the JSON only when the chunk is not an ordinary token chunk. */
export function scanEvent(ev: SseEvent): EventInfo {
  const d = ev.data;
  if (d === undefined || d.charCodeAt(0) !== 123 /* { */) return inspectEvent(ev);
  return tokenChunk(d) ?? inspectEvent(ev);
}

/** The EventInfo of an ordinary token chunk, or undefined when `d` is anything else (or unsure). */
export function tokenChunk(d: string): EventInfo | undefined {
  if (d.charCodeAt(d.length - 1) !== 125 /* } */ || d.indexOf('"choices":[{') < 0) return undefined;
  for (const k of NEEDS_PARSE) if (d.indexOf(k) >= 0) return undefined;
  if (!onlyValue(d, '"error":', "null") || !onlyValue(d, '"finish_reason":', "null") || !onlyValue(d, '"index":', "0")) return undefined;
  const text = d.indexOf('"delta":{') >= 0 ? stringKey(d, '"content":') : stringKey(d, '"text":');
  if (text === undefined) return undefined;
  return { kind: "chunk", text, output: text.length > 0, roleOnly: false, finish: false, usageOnly: false };
}

/** Every occurrence of `key` is followed by `value` and then `,` or `}` (true when there is none). */
function onlyValue(d: string, key: string, value: string): boolean {
  for (let at = d.indexOf(key); at >= 0; at = d.indexOf(key, at + key.length)) {
    const v = at + key.length;
    if (!d.startsWith(value, v)) return false;
    const after = d.charCodeAt(v + value.length);
    if (after !== 44 /* , */ && after !== 125 /* } */) return false;
  }
  return true;
}

/**
 * The string value of the one occurrence of `key` ("" for null or when absent); undefined when the key occurs
 * more than once, holds another type, or is not preceded by `{` or `,` (so it could not be a plain key).
 */
function stringKey(d: string, key: string): string | undefined {
  const at = d.indexOf(key);
  if (at < 0) return "";
  if (d.indexOf(key, at + key.length) >= 0) return undefined;
  const before = d.charCodeAt(at - 1);
  if (before !== 123 /* { */ && before !== 44 /* , */) return undefined;
  const v = at + key.length;
  if (d.startsWith("null", v)) return "";
  if (d.charCodeAt(v) !== 34 /* " */) return undefined;
  const backslash = d.indexOf("\\", v + 1);
  for (let q = d.indexOf('"', v + 1); q >= 0; q = d.indexOf('"', q + 1)) {
    let slashes = 0;
    while (d.charCodeAt(q - 1 - slashes) === 92 /* \ */) slashes++;
    if (slashes % 2 === 1) continue;
    // The closing quote: without an escape in between the text is the slice itself.
    if (backslash < 0 || backslash > q) return d.slice(v + 1, q);
    try {
      return JSON.parse(d.slice(v, q + 1)) as string;
    } catch {
      return undefined;
    }
  }
  return undefined;
}
