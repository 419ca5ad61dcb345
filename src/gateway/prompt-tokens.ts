/**
 * @module Turns a request body into the token ids the router hashes: the model's precise tokenizer when one is
 * configured and loads, else approximate mode. A tokenizer that fails to load degrades routing, not the request.
 */
import { isKvgateError } from "../core/errors.ts";
import type { NowFn } from "../routing/index.ts";
import {
  ApproximateTokenizer, emptyNotes, type ChatRequestBody, type CompletionRequestBody, type PromptTokenizer, type TokenizerMode,
  type TokenizerRegistry,
} from "../tokenize/index.ts";

export type Endpoint = "chat" | "completions";

export interface PromptTokens {
  tokens: Uint32Array;
  mode: TokenizerMode;
  /** Fine-clock time spent choosing the tokenizer and tokenizing (a first load is not counted). */
  ms: number;
}

export class PromptTokenizerPool {
  readonly #approximate: ApproximateTokenizer;

  constructor(private readonly registry: TokenizerRegistry, private readonly fineNow: NowFn, blockSize: number, private readonly onFallback: (model: string, e: unknown) => void) {
    this.#approximate = new ApproximateTokenizer({ blockSizeHint: blockSize });
  }

  async #tokenizer(model: string | undefined): Promise<PromptTokenizer> {
    const ready = this.registry.peek(model);
    if (ready) return ready;
    try {
      return await this.registry.get(model);
    } catch (e) {
      if (isKvgateError(e) && e.code === "KVGATE_ERR_TOKENIZER") {
        this.onFallback(model ?? "", e);
        return this.#approximate;
      }
      throw e;
    }
  }

  /**
   * Token ids of the prompt the engine will build for `body`. Malformed messages or prompts throw a 400
   * KvgateError; a template that cannot render this conversation falls back to approximate ids.
   */
  async tokenize(endpoint: Endpoint, body: Record<string, unknown>, model: string | undefined): Promise<PromptTokens> {
    let tok = await this.#tokenizer(model);
    const t0 = this.fineNow();
    const notes = emptyNotes();
    let tokens: Uint32Array;
    try {
      tokens = this.#run(tok, endpoint, body, notes);
    } catch (e) {
      if (!isKvgateError(e) || e.code !== "KVGATE_ERR_TOKENIZER" || tok === this.#approximate) throw e;
      this.onFallback(model ?? "", e);
      tok = this.#approximate;
      tokens = this.#run(tok, endpoint, body, notes);
    }
    return { tokens, mode: tok.mode, ms: this.fineNow() - t0 };
  }

  #run(tok: PromptTokenizer, endpoint: Endpoint, body: Record<string, unknown>, notes: ReturnType<typeof emptyNotes>): Uint32Array {
    return endpoint === "chat"
      ? tok.tokenizeChat(body as unknown as ChatRequestBody, notes)
      : tok.tokenizeCompletion(body as unknown as CompletionRequestBody, notes);
  }
}
