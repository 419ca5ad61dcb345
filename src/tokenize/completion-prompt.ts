/** @module Picks the prompt kvgate routes on out of a `/v1/completions` body, and applies vLLM's left truncation. */
import { KvgateError } from "../core/errors.ts";
import type { CompletionRequestBody, TokenizeNotes } from "./types.ts";

/** Either text to encode, or token ids the client already chose (vLLM uses those as they are). */
export type FirstPrompt = { text: string; ids?: undefined } | { text?: undefined; ids: Uint32Array };

function bad(message: string): KvgateError {
  return new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message, { param: "prompt" });
}

function toIds(arr: readonly unknown[]): Uint32Array {
  const out = new Uint32Array(arr.length);
  for (let i = 0; i < arr.length; i++) {
    const v = arr[i];
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 0xffffffff) {
      throw bad(`prompt token ids must be non-negative integers (index ${i})`);
    }
    out[i] = v;
  }
  return out;
}

/**
 * The first prompt of a completions body. A batch (`string[]` or `number[][]`) is several independent engine
 * requests; kvgate sends the whole body to one worker, so it routes on the first prompt and reports the batch size.
 */
export function firstPrompt(body: CompletionRequestBody, notes?: TokenizeNotes): FirstPrompt {
  const p: unknown = body?.prompt;
  if (notes) notes.batchSize = 1;
  if (typeof p === "string") return { text: p };
  if (!Array.isArray(p)) throw bad("prompt must be a string, an array of strings, or an array of token ids");
  if (p.length === 0) throw bad("prompt must not be empty");
  const head: unknown = p[0];
  if (typeof head === "number") return { ids: toIds(p) };
  if (notes) notes.batchSize = p.length;
  if (typeof head === "string") return { text: head };
  if (Array.isArray(head)) {
    if (head.length === 0) throw bad("prompt token ids must not be empty");
    return { ids: toIds(head) };
  }
  throw bad("prompt must be a string, an array of strings, or an array of token ids");
}

/** `add_special_tokens` as sent, else the endpoint default (completions true, chat false in vLLM). */
export function addSpecialTokens(body: { add_special_tokens?: unknown }, fallback: boolean): boolean {
  const v = body.add_special_tokens;
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "boolean") throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "add_special_tokens must be a boolean");
  return v;
}

/**
 * vLLM's `truncate_prompt_tokens = k` keeps the last k tokens. The special value -1 means "up to the model's
 * length", which only the engine knows, so kvgate leaves the prompt whole then.
 */
export function truncateLeft(ids: Uint32Array, body: { truncate_prompt_tokens?: unknown }, notes?: TokenizeNotes): Uint32Array {
  if (notes) notes.truncated = 0;
  const k = body.truncate_prompt_tokens;
  if (k === undefined || k === null || k === -1) return ids;
  if (typeof k !== "number" || !Number.isInteger(k) || k < 1) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "truncate_prompt_tokens must be a positive integer or -1");
  }
  if (ids.length <= k) return ids;
  if (notes) notes.truncated = ids.length - k;
  return ids.subarray(ids.length - k);
}
