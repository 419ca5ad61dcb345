/**
 * @module Mid-stream migration: the request that continues a broken stream on another worker, per endpoint.
 *
 * - Chat completions: the text generated so far becomes a final assistant message, sent with
 *   `continue_final_message: true` and `add_generation_prompt: false` (vLLM renders the template without closing
 *   that turn, so generation resumes inside it). When the client's own last message was an assistant message
 *   being continued, the text is appended to it instead.
 * - Completions: the prompt becomes prompt + generated text (string prompts only).
 * - Both: `max_tokens` / `max_completion_tokens` (and `min_tokens`) shrink by the tokens already sent, counted as
 *   streamed chunks that carried text (vLLM sends one per decode step without speculative decoding, so this can
 *   over-count under speculation and the continuation may stop a little early, never late).
 * The continuation's chunks are re-labelled with the first stream's id and created time, its repeated role chunk
 * is dropped and its usage is shifted (the generated text moves from the prompt back to the completion), so the
 * client reads one unbroken stream. Not migratable (the stream ends with an error event instead): several
 * choices, tool calls or reasoning in the output, echo, token-id or batched prompts, structured output.
 */
import type { Endpoint } from "./prompt-tokens.ts";

/** Why this request's stream cannot be continued elsewhere, or undefined when it can. */
export function notMigratable(endpoint: Endpoint, body: Record<string, unknown>): string | undefined {
  if (typeof body.n === "number" && body.n > 1) return "n > 1";
  if (typeof body.best_of === "number" && body.best_of > 1) return "best_of > 1";
  if (body.response_format !== undefined && body.response_format !== null && (body.response_format as { type?: unknown }).type !== "text") return "structured output";
  for (const k of ["guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs"]) if (body[k] !== undefined && body[k] !== null) return "structured output";
  if (endpoint === "completions") {
    if (typeof body.prompt !== "string") return "the prompt is not a single string";
    if (body.echo === true) return "echo";
    if (body.suffix !== undefined && body.suffix !== null) return "suffix";
  }
  return undefined;
}

function shrink(body: Record<string, unknown>, key: string, by: number, min: number): void {
  const v = body[key];
  if (typeof v === "number" && Number.isFinite(v)) body[key] = Math.max(min, v - by);
}

/** The body that continues `body` after `generated` (sent as `tokensSent` chunks). */
export function continuationBody(endpoint: Endpoint, body: Record<string, unknown>, generated: string, tokensSent: number): Record<string, unknown> {
  const next: Record<string, unknown> = { ...body };
  if (endpoint === "chat") {
    const messages = [...(body.messages as Record<string, unknown>[])];
    const last = messages[messages.length - 1];
    if (body.continue_final_message === true && last?.role === "assistant" && typeof last.content === "string") {
      messages[messages.length - 1] = { ...last, content: last.content + generated };
    } else {
      messages.push({ role: "assistant", content: generated });
    }
    next.messages = messages;
    next.continue_final_message = true;
    next.add_generation_prompt = false;
    shrink(next, "max_completion_tokens", tokensSent, 1);
  } else {
    next.prompt = (body.prompt as string) + generated;
  }
  shrink(next, "max_tokens", tokensSent, 1);
  shrink(next, "min_tokens", tokensSent, 0);
  return next;
}

/** Tokens a request may still generate, or undefined when it set no limit. */
export function remainingTokens(endpoint: Endpoint, body: Record<string, unknown>, tokensSent: number): number | undefined {
  const limit = endpoint === "chat" ? (body.max_completion_tokens ?? body.max_tokens) : body.max_tokens;
  return typeof limit === "number" ? limit - tokensSent : undefined;
}

/**
 * Usage as the client should see it after a continuation: its prompt held the text already generated, which
 * belongs to the completion. Token counts of that text are the chunk counts (see the module comment).
 */
export function shiftUsage(u: unknown, tokensBefore: number): unknown {
  if (u === null || typeof u !== "object") return u;
  const x = { ...(u as Record<string, unknown>) };
  if (typeof x.prompt_tokens === "number") x.prompt_tokens = Math.max(0, x.prompt_tokens - tokensBefore);
  if (typeof x.completion_tokens === "number") x.completion_tokens += tokensBefore;
  if (typeof x.prompt_tokens === "number" && typeof x.completion_tokens === "number") x.total_tokens = x.prompt_tokens + x.completion_tokens;
  const d = x.prompt_tokens_details as { cached_tokens?: unknown } | null | undefined;
  if (d && typeof d.cached_tokens === "number" && typeof x.prompt_tokens === "number" && d.cached_tokens > x.prompt_tokens) {
    x.prompt_tokens_details = { ...d, cached_tokens: x.prompt_tokens };
  }
  return x;
}
