/**
 * @module Reads `/v1/chat/completions` and `/v1/completions` bodies into what the simulated engine needs: prompt
 * token ids, output length and streaming options. Invalid bodies throw KvgateError with an OpenAI-style status.
 * Sampling parameters are accepted and ignored (the output is deterministic filler).
 */
import { KvgateError } from "../core/errors.ts";
import { emptyNotes, type ChatRequestBody, type CompletionRequestBody } from "../tokenize/types.ts";
import { simChatTokens, simCompletionTokens } from "./sim-tokenizer.ts";

export type EndpointKind = "chat" | "completion";

export interface ParsedRequest {
  kind: EndpointKind;
  /** The model named in the body (undefined when omitted). */
  model: string | undefined;
  prompt: Uint32Array;
  maxTokens: number | undefined;
  stream: boolean;
  /** The LoRA adapter the model names (set by the app, which knows the engine's adapters). */
  lora?: string;
  /** vLLM's `cache_salt`: salts the first block's hash, so only requests with the same salt share cached blocks. */
  cacheSalt: string | undefined;
  /** `stream_options.include_usage`: a final chunk with `choices: []` and `usage`. */
  includeUsage: boolean;
  /** vLLM's `stream_options.continuous_usage_stats`: usage on every chunk. */
  continuousUsage: boolean;
}

function bad(message: string, param?: string): KvgateError {
  return new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message, param ? { param } : undefined);
}

function optionalInt(body: Record<string, unknown>, name: string): number | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw bad(`${name} must be a positive integer`, name);
  return v;
}

function optionalBool(v: unknown, name: string): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v !== "boolean") throw bad(`${name} must be a boolean`, name);
  return v;
}

/** `prompt_token_ids`: a kvgate/sim extension that bypasses tokenization (trace replay sends synthetic ids). */
function tokenIds(v: unknown): Uint32Array | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.length === 0) throw bad("prompt_token_ids must be a non-empty array of token ids", "prompt_token_ids");
  const out = new Uint32Array(v.length);
  v.forEach((t, i) => {
    if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t > 0xffffffff) {
      throw bad(`prompt_token_ids[${i}] is not an integer in 0..4294967295`, "prompt_token_ids");
    }
    out[i] = t;
  });
  return out;
}

export function parseRequest(kind: EndpointKind, raw: unknown): ParsedRequest {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) throw bad("the request body must be a JSON object");
  const body = raw as Record<string, unknown>;
  if (body.model !== undefined && body.model !== null && typeof body.model !== "string") throw bad("model must be a string", "model");
  const salt = body.cache_salt;
  if (salt !== undefined && salt !== null && (typeof salt !== "string" || salt.length === 0)) throw bad("cache_salt must be a non-empty string", "cache_salt");
  const n = optionalInt(body, "n");
  if (n !== undefined && n !== 1) throw bad("the simulated engine supports n = 1 only", "n");
  if (body.best_of !== undefined && body.best_of !== null && body.best_of !== 1) throw bad("the simulated engine supports best_of = 1 only", "best_of");
  const stream = optionalBool(body.stream, "stream");
  const so = body.stream_options;
  if (so !== undefined && so !== null && (typeof so !== "object" || Array.isArray(so))) throw bad("stream_options must be an object", "stream_options");
  const opts = (so ?? {}) as Record<string, unknown>;
  if (so != null && !stream) throw bad("stream_options can only be set when stream is true", "stream_options");
  const maxTokens = kind === "chat" ? (optionalInt(body, "max_completion_tokens") ?? optionalInt(body, "max_tokens")) : optionalInt(body, "max_tokens");
  let prompt = tokenIds(body.prompt_token_ids);
  if (!prompt) {
    if (kind === "chat") {
      if (!Array.isArray(body.messages) || body.messages.length === 0) throw bad("messages must be a non-empty array", "messages");
      prompt = simChatTokens(body as unknown as ChatRequestBody);
    } else {
      if (body.prompt === undefined || body.prompt === null) throw bad("prompt is required", "prompt");
      const notes = emptyNotes();
      prompt = simCompletionTokens(body as unknown as CompletionRequestBody, notes);
      if (notes.batchSize > 1) throw bad("the simulated engine takes one prompt per request", "prompt");
    }
  }
  if (prompt.length === 0) throw bad("the prompt is empty", kind === "chat" ? "messages" : "prompt");
  return {
    kind,
    model: (body.model as string | undefined) ?? undefined,
    prompt,
    cacheSalt: typeof salt === "string" ? salt : undefined,
    maxTokens,
    stream,
    includeUsage: optionalBool(opts.include_usage, "stream_options.include_usage"),
    continuousUsage: optionalBool(opts.continuous_usage_stats, "stream_options.continuous_usage_stats"),
  };
}
