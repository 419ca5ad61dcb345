/**
 * @module Builds the `messages` and `tools` a chat template sees from an OpenAI chat body, following vLLM's
 * message parsing (content parts, tool calls, tool results), so the rendered prompt is the engine's.
 */
import { KvgateError } from "../core/errors.ts";

/** How message content reaches the template: joined text ("string") or a list of typed parts ("openai"). */
export type ContentFormat = "string" | "openai";

type Json = Record<string, unknown>;

// Part types whose payload is text, and where that text lives (vLLM's text-like parsers).
const TEXT_FIELDS: Record<string, string> = {
  text: "text",
  input_text: "text",
  output_text: "text",
  refusal: "refusal",
  thinking: "thinking",
};

// Media part types and the modality the template sees in "openai" format.
const MEDIA: Record<string, string> = {
  image_url: "image",
  input_image: "image",
  image_embeds: "image",
  image_pil: "image",
  audio_url: "audio",
  input_audio: "audio",
  audio_embeds: "audio",
  video_url: "video",
  prompt_embeds: "prompt_embeds",
};

// Untyped parts are recognised by their payload key, as vLLM does.
const UNTYPED_KEYS = ["image_url", "image_pil", "image_embeds", "audio_embeds", "prompt_embeds", "audio_url", "input_audio", "video_url"];

function bad(message: string, param = "messages"): KvgateError {
  return new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message, { param });
}

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

interface Counter {
  media: number;
}

/** One content part → a text string, a typed dict ("openai"), or null when it contributes nothing. */
function parsePart(part: unknown, format: ContentFormat, seen: Counter): string | Json | null {
  if (typeof part === "string") return format === "openai" ? { type: "text", text: part } : part;
  if (!isObject(part)) throw bad("content parts must be objects or strings");
  let type = part.type;
  if (type === undefined || type === null) {
    type = UNTYPED_KEYS.find((k) => k in part) ?? ("tool_reference" in part ? "tool_reference" : undefined);
    if (type === undefined) throw bad("content part is missing 'type'");
  }
  if (typeof type !== "string") throw bad("content part 'type' must be a string");
  const field = TEXT_FIELDS[type];
  if (field !== undefined) {
    const text = part[field];
    // vLLM skips text/refusal parts whose payload is missing rather than failing the request.
    if (text === undefined || text === null) return null;
    if (typeof text !== "string") throw bad(`content part '${type}' must carry a string`);
    return format === "openai" ? { type: "text", text } : text;
  }
  if (type === "tool_reference") {
    const name = part.name;
    if (typeof name !== "string") throw bad("tool_reference part needs a string 'name'");
    return format === "openai" ? { type: "tool_reference", name } : name;
  }
  const modality = MEDIA[type];
  if (modality === undefined) throw bad(`unsupported chat content part type: '${type}'`);
  seen.media++;
  // "string" format: a multimodal engine puts its own placeholder text in front of the message; kvgate cannot
  // know it (nor the expanded token count), so it adds nothing and the caller is told through the count.
  return format === "openai" ? { type: modality } : null;
}

function parseContent(content: unknown, format: ContentFormat, seen: Counter): string | Json[] {
  let parts: readonly unknown[];
  if (content === undefined || content === null) parts = [];
  else if (typeof content === "string") parts = [content];
  else if (Array.isArray(content)) parts = content;
  else throw bad("message content must be a string or an array of parts");
  const out: Array<string | Json> = [];
  for (const p of parts) {
    const r = parsePart(p, format, seen);
    if (r !== null) out.push(r);
  }
  return format === "openai" ? (out as Json[]) : (out as string[]).join("\n");
}

/** vLLM turns tool-call arguments into objects: templates expect dicts; bad JSON and non-objects become `{}`. */
function parseToolCalls(calls: unknown[]): Json[] {
  return calls.map((c) => {
    if (!isObject(c) || !isObject(c.function)) throw bad("each tool_call needs a 'function' object");
    const fn: Json = { ...c.function };
    const args = fn.arguments;
    if (typeof args === "string") {
      try {
        fn.arguments = JSON.parse(args);
      } catch {
        fn.arguments = {};
      }
    } else if (!isObject(args) && !Array.isArray(args)) {
      fn.arguments = {};
    }
    return { ...c, function: fn };
  });
}

/**
 * The conversation vLLM hands to the chat template. New objects throughout: the body is forwarded to the worker
 * unchanged, so nothing here may mutate it.
 */
export function buildConversation(messages: unknown, format: ContentFormat): { conversation: Json[]; mediaParts: number } {
  if (!Array.isArray(messages)) throw bad("messages must be an array");
  const seen: Counter = { media: 0 };
  const conversation = messages.map((m, i): Json => {
    if (!isObject(m) || typeof m.role !== "string") throw bad(`messages[${i}] needs a string 'role'`);
    const role = m.role;
    const msg: Json = { role, content: parseContent(m.content, format, seen) };
    if (role === "assistant") {
      if (Array.isArray(m.tool_calls)) {
        // An empty list is dropped so templates take their plain-assistant branch (vLLM does the same).
        if (m.tool_calls.length > 0) msg.tool_calls = parseToolCalls(m.tool_calls);
      } else if (m.tool_calls !== undefined && m.tool_calls !== null) {
        throw bad(`messages[${i}].tool_calls must be an array`);
      }
      if (m.reasoning !== undefined && m.reasoning !== null) {
        msg.reasoning = m.reasoning;
        msg.reasoning_content = m.reasoning; // templates written for older vLLM read this name
      }
    } else if (role === "tool") {
      if ("tool_call_id" in m) msg.tool_call_id = m.tool_call_id;
      // Tool results sent as text parts are flattened to one string (most templates expect a string there).
      const c = msg.content;
      if (Array.isArray(c) && c.every((p) => isObject(p) && p.type === "text")) {
        msg.content = c.length ? c.map((p) => (p as Json).text as string).join("\n") : "";
      }
    }
    if (typeof m.name === "string") msg.name = m.name;
    if (typeof m.task === "string") msg.task = m.task;
    if (role === "developer") msg.tools = m.tools ?? null;
    return msg;
  });
  return { conversation, mediaParts: seen.media };
}

/** Fields vLLM's `FunctionDefinition` declares, in order; `model_dump()` emits each, null when absent. */
export const DEFAULT_TOOL_FUNCTION_FIELDS: readonly string[] = ["name", "description", "parameters"];

function dumpDeclared(src: Json, declared: readonly string[], defaults: Json): Json {
  // pydantic's model_dump: declared fields in declaration order, then extra fields in the order they came.
  const out: Json = {};
  for (const k of declared) out[k] = src[k] ?? defaults[k] ?? null;
  for (const [k, v] of Object.entries(src)) if (!declared.includes(k)) out[k] = v;
  return out;
}

/**
 * The `tools` value the template sees: vLLM passes `[tool.model_dump() for tool in request.tools]`, so absent
 * optional fields appear as null (they show up in templates that `tojson` the tool). None when there are no tools
 * or `tool_choice` is "none" and the server was started to drop tools then.
 */
export function dumpTools(
  tools: unknown,
  toolChoice: unknown,
  opts: { functionFields?: readonly string[]; excludeToolsWhenToolChoiceNone?: boolean } = {},
): Json[] | null {
  if (tools === undefined || tools === null) return null;
  if (!Array.isArray(tools)) throw bad("tools must be an array", "tools");
  if (toolChoice === "none" && opts.excludeToolsWhenToolChoiceNone) return null;
  const fnFields = opts.functionFields ?? DEFAULT_TOOL_FUNCTION_FIELDS;
  return tools.map((t, i) => {
    if (!isObject(t) || !isObject(t.function) || typeof t.function.name !== "string") {
      throw bad(`tools[${i}] needs a 'function' object with a string 'name'`, "tools");
    }
    const fn = dumpDeclared(t.function, fnFields, {});
    return dumpDeclared({ ...t, function: fn }, ["type", "function"], { type: "function" });
  });
}
