/**
 * @module Reads one upstream SSE event of an OpenAI-style stream (vLLM/SGLang chunk formats) for what the gateway
 * must know — [DONE], an error, generated text, a finish reason, usage — without changing its bytes.
 */
import type { SseEvent } from "./sse-splitter.ts";

export interface EventInfo {
  kind: "done" | "error" | "chunk" | "other";
  json?: Record<string, unknown>;
  /** Generated text in this chunk (chat delta.content or completions text). */
  text: string;
  /** The chunk carries output: text, tool calls, reasoning or a finish reason. */
  output: boolean;
  /** A chat chunk that only announces the assistant role (sent first; repeated by a continuation). */
  roleOnly: boolean;
  finish: boolean;
  /** `choices: []` with usage: the include_usage chunk. */
  usageOnly: boolean;
  usage?: unknown;
  /** Why a continuation could not reproduce this stream (tool calls, reasoning, several choices). */
  unmigratable?: string;
}

const OTHER: EventInfo = { kind: "other", text: "", output: false, roleOnly: false, finish: false, usageOnly: false };

export function inspectEvent(ev: SseEvent): EventInfo {
  const data = ev.data;
  if (data === undefined) return OTHER;
  if (data === "[DONE]") return { ...OTHER, kind: "done" };
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    return OTHER;
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) return OTHER;
  const obj = json as Record<string, unknown>;
  if (obj.error !== undefined && obj.error !== null) return { ...OTHER, kind: "error", json: obj };
  const info: EventInfo = { kind: "chunk", json: obj, text: "", output: false, roleOnly: false, finish: false, usageOnly: false, usage: obj.usage ?? undefined };
  const choices = obj.choices;
  if (!Array.isArray(choices)) return info;
  if (choices.length === 0) {
    info.usageOnly = obj.usage !== undefined && obj.usage !== null;
    return info;
  }
  for (const c of choices as Record<string, unknown>[]) {
    if (c === null || typeof c !== "object") continue;
    if (typeof c.index === "number" && c.index > 0) info.unmigratable = "several choices";
    if (c.finish_reason !== null && c.finish_reason !== undefined) info.finish = true;
    const delta = c.delta as Record<string, unknown> | undefined;
    if (delta && typeof delta === "object") {
      if (typeof delta.content === "string") info.text += delta.content;
      if (Array.isArray(delta.tool_calls) && delta.tool_calls.length > 0) info.unmigratable = "tool calls";
      const reasoning = delta.reasoning_content ?? delta.reasoning;
      if (typeof reasoning === "string" && reasoning.length > 0) info.unmigratable ??= "reasoning output";
    } else if (typeof c.text === "string") {
      info.text += c.text;
    }
  }
  info.output = info.text.length > 0 || info.finish || info.unmigratable !== undefined;
  const first = choices[0] as { delta?: { role?: unknown } } | undefined;
  info.roleOnly = !info.output && typeof first?.delta?.role === "string";
  return info;
}

const encoder = new TextEncoder();

/** Re-encodes a chunk a continuation produced, in the first attempt's identity (id, created), as one SSE event. */
export function rewriteChunk(json: Record<string, unknown>, identity: { id?: unknown; created?: unknown }, fixUsage: (u: unknown) => unknown): Uint8Array {
  const out: Record<string, unknown> = { ...json };
  if (identity.id !== undefined) out.id = identity.id;
  if (identity.created !== undefined) out.created = identity.created;
  if (out.usage !== undefined && out.usage !== null) out.usage = fixUsage(out.usage);
  return encoder.encode(`data: ${JSON.stringify(out)}\n\n`);
}

/** An OpenAI error as a stream event (vLLM's mid-stream error form), followed by [DONE]. */
export function errorEvents(error: { toJSON(): unknown }): Uint8Array {
  return encoder.encode(`data: ${JSON.stringify(error.toJSON())}\n\ndata: [DONE]\n\n`);
}

export const DONE_EVENT = encoder.encode("data: [DONE]\n\n");

/** Joins the events of one upstream read into one write. */
export function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
