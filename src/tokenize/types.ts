/** @module The request shapes the tokenizers read and the `PromptTokenizer` contract the gateway calls per request. */

/**
 * `precise`: the model's own tokenizer and chat template, so token ids (and so block hashes) equal the engine's.
 * `approximate`: no tokenizer; UTF-8 bytes of a fixed rendering in 4-byte chunks. Only the router's own past
 * decisions can match these; they never equal an engine's tokens or KV-event hashes.
 */
export type TokenizerMode = "precise" | "approximate";

/** One OpenAI content part. Only text-like parts add text; media parts are counted (see `TokenizeNotes`). */
export interface ContentPart {
  type?: string;
  text?: string | null;
  [key: string]: unknown;
}

export interface ToolCall {
  id?: string;
  type?: string;
  function: { name: string; arguments?: unknown; [key: string]: unknown };
  [key: string]: unknown;
}

export interface ChatMessage {
  role: string;
  content?: string | Array<ContentPart | string> | null;
  name?: string;
  tool_calls?: ToolCall[] | null;
  tool_call_id?: string;
  /** Interleaved thinking for an earlier assistant turn (vLLM reads `reasoning`). */
  reasoning?: string | null;
  [key: string]: unknown;
}

export interface ToolParam {
  type?: string;
  function: { name: string; description?: string | null; parameters?: Record<string, unknown> | null; [key: string]: unknown };
  [key: string]: unknown;
}

/** The fields of a `/v1/chat/completions` body that change the prompt the engine builds. */
export interface ChatRequestBody {
  model?: string;
  messages: ChatMessage[];
  tools?: ToolParam[] | null;
  tool_choice?: unknown;
  /** Default true, as in vLLM. */
  add_generation_prompt?: boolean;
  /** Default false; exclusive with add_generation_prompt (vLLM answers 400 when both are true). */
  continue_final_message?: boolean;
  /** Default false for chat: the template already placed the special tokens. */
  add_special_tokens?: boolean;
  chat_template_kwargs?: Record<string, unknown> | null;
  documents?: unknown;
  reasoning_effort?: unknown;
  /** vLLM keeps only the last k prompt tokens when set (k ≥ 1). */
  truncate_prompt_tokens?: number | null;
  [key: string]: unknown;
}

/** The fields of a `/v1/completions` body that change the prompt. */
export interface CompletionRequestBody {
  model?: string;
  /** A string, a token array, or a batch of either; a batch is routed on its first prompt. */
  prompt: string | number[] | string[] | number[][];
  /** Default true for completions (a BOS is added when the tokenizer's post-processor has one). */
  add_special_tokens?: boolean;
  truncate_prompt_tokens?: number | null;
  [key: string]: unknown;
}

/**
 * Optional out-parameter: what a tokenize call noticed but could not express in the token ids.
 * Pass a fresh object (or reuse one; every field is overwritten).
 */
export interface TokenizeNotes {
  /**
   * Image, audio, video or embedding parts seen. They add no tokens here; an engine inserts placeholder tokens
   * for them (and keys the blocks on the media hash), so blocks from the first message holding media on will
   * not match the engine's.
   */
  mediaParts: number;
  /** Completions: how many prompts the body held. kvgate routes a batch on its first prompt only. */
  batchSize: number;
  /** Tokens dropped from the front by `truncate_prompt_tokens`. */
  truncated: number;
}

export function emptyNotes(): TokenizeNotes {
  return { mediaParts: 0, batchSize: 1, truncated: 0 };
}

/** Turns OpenAI request bodies into the token ids the router hashes. One per model (precise) or shared (approximate). */
export interface PromptTokenizer {
  readonly mode: TokenizerMode;
  /** The model these ids are for; `"*"` for the shared approximate tokenizer. */
  readonly model: string;
  /**
   * Block size (tokens) the router hashes these ids with. Precise: the engine's block size, for callers that
   * want `fullBlocks`. Approximate: a block then covers `4 × blockSizeHint` bytes of rendered text.
   */
  readonly blockSizeHint: number;
  /** The prompt text the engine would see for a chat body (precise: the chat template's output). */
  renderChat(body: ChatRequestBody, notes?: TokenizeNotes): string;
  /** Token ids of a chat body's prompt, rendered and encoded as vLLM does. Throws `KvgateError`. */
  tokenizeChat(body: ChatRequestBody, notes?: TokenizeNotes): Uint32Array;
  /** Token ids of a completions body's (first) prompt. Throws `KvgateError`. */
  tokenizeCompletion(body: CompletionRequestBody, notes?: TokenizeNotes): Uint32Array;
  /** Precise mode: whole sections (chat messages) found in the encoder's section cache, and encoded (cumulative). */
  readonly sections?: { readonly hits: number; readonly misses: number };
}

/** Complete blocks in a prompt of `tokens` tokens; the engine (and the router) only hash complete blocks. */
export function fullBlocks(tokens: number, blockSize: number): number {
  return Math.floor(tokens / blockSize);
}
