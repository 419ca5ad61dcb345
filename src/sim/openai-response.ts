/**
 * @module OpenAI/vLLM response bodies and SSE chunks for the simulated engine: `chat.completion(.chunk)` and
 * `text_completion`, the role-only first chat chunk, finish_reason on the chunk carrying the last token, the
 * `choices: []` usage chunk, and usage with `prompt_tokens_details.cached_tokens`.
 */
import type { EndpointKind } from "./openai-request.ts";

export interface ResponseMeta {
  kind: EndpointKind;
  /** `chatcmpl-…` or `cmpl-…`. */
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
}

export interface Usage {
  prompt_tokens: number;
  total_tokens: number;
  completion_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export function usage(prompt: number, completion: number, cached: number): Usage {
  return { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion, prompt_tokens_details: { cached_tokens: cached } };
}

function envelope(meta: ResponseMeta, stream: boolean): Record<string, unknown> {
  const object = meta.kind === "chat" ? (stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return { id: meta.id, object, created: meta.created, model: meta.model };
}

/** The first chat chunk: the assistant role with empty content, as vLLM sends it. */
export function roleChunk(meta: ResponseMeta, u?: Usage): Record<string, unknown> {
  const choice = { index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null };
  return { ...envelope(meta, true), choices: [choice], ...(u ? { usage: u } : {}) };
}

/** One streamed piece of text; `finish` is set on the chunk with the last token. */
export function textChunk(meta: ResponseMeta, text: string, finish: string | null, u?: Usage): Record<string, unknown> {
  const choice = meta.kind === "chat"
    ? { index: 0, delta: { content: text }, logprobs: null, finish_reason: finish, stop_reason: null }
    : { index: 0, text, logprobs: null, finish_reason: finish, stop_reason: null };
  return { ...envelope(meta, true), choices: [choice], ...(u ? { usage: u } : {}) };
}

/** The final usage chunk of `stream_options.include_usage`. */
export function usageChunk(meta: ResponseMeta, u: Usage): Record<string, unknown> {
  return { ...envelope(meta, true), choices: [], usage: u };
}

/** A whole (non-streamed) response. */
export function fullResponse(meta: ResponseMeta, text: string, finish: string, u: Usage): Record<string, unknown> {
  const choice = meta.kind === "chat"
    ? { index: 0, message: { role: "assistant", content: text, tool_calls: [] }, logprobs: null, finish_reason: finish, stop_reason: null }
    : { index: 0, text, logprobs: null, finish_reason: finish, stop_reason: null, prompt_logprobs: null };
  return { ...envelope(meta, false), choices: [choice], usage: u, prompt_logprobs: null };
}

const encoder = new TextEncoder();

export function sseData(obj: unknown): Uint8Array {
  return encoder.encode(`data: ${JSON.stringify(obj)}\n\n`);
}

export const SSE_DONE = encoder.encode("data: [DONE]\n\n");
