/**
 * @module Decides whether a chat template wants message content as one string or as a list of typed parts, the
 * way vLLM's "auto" content format does, from the template text alone.
 */
import type { ContentFormat } from "./conversation.ts";

// `{% for m in messages %}`, `{%- for m in messages[1:] -%}`, `{% for m in loop_messages %}` (after a set from messages).
const FOR_IN = /\{%-?\s*for\s+(\w+)\s+in\s+([\w.]+)/g;
const SET_FROM = /\{%-?\s*set\s+(\w+)\s*=\s*([\w.]+)/g;

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * "openai" when the template iterates over a message's content (`for part in message['content']`), else
 * "string" — vLLM walks the Jinja AST for the same pattern. This scan follows the variables bound to `messages`
 * (by `set` or a loop over it) one assignment level deep, which covers the templates shipped on the Hub; a model
 * whose template defeats it can pin the format in its config.
 */
export function detectContentFormat(template: string): ContentFormat {
  const messageVars = new Set<string>(["messages"]);
  for (const m of template.matchAll(SET_FROM)) {
    const src = m[2]!.split(".")[0]!;
    if (messageVars.has(src)) messageVars.add(m[1]!);
  }
  const itemVars = new Set<string>();
  for (const m of template.matchAll(FOR_IN)) {
    const src = m[2]!.split(".")[0]!;
    if (messageVars.has(src)) itemVars.add(m[1]!);
  }
  for (const v of itemVars) {
    const re = new RegExp(`\\{%-?\\s*for\\s+\\w+\\s+in\\s+${escape(v)}(?:\\.content\\b|\\[\\s*['"]content['"]\\s*\\])`);
    if (re.test(template)) return "openai";
  }
  return "string";
}
