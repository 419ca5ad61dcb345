/**
 * @module Precise mode: a model's own tokenizer.json and chat template, used the way vLLM uses them, so the
 * ids equal the engine's and the router's block hashes line up with the engine's KV events.
 */
import { KvgateError } from "../core/errors.ts";
import { ChatTemplate, specialTokenVariables, type ChatTemplateOptions, type TemplateSource } from "./chat-template.ts";
import { addSpecialTokens, firstPrompt, truncateLeft } from "./completion-prompt.ts";
import { joinSource, type ReadText } from "./text-loader.ts";
import { Tokenizer, type HfTokenizer } from "./hf-tokenizers.ts";
import { createTokenEncoder, type TokenEncoder } from "./token-encoder.ts";
import type { ChatRequestBody, CompletionRequestBody, PromptTokenizer, TokenizeNotes } from "./types.ts";

/** Where a model's tokenizer files are: local paths or http(s) URLs. */
export interface ModelTokenizerSource {
  /** A directory or URL prefix holding `tokenizer.json` and `tokenizer_config.json` (e.g. a Hub `resolve/main/`). */
  dir?: string;
  tokenizerJson?: string;
  tokenizerConfig?: string;
  /**
   * The chat template when it is not (only) in tokenizer_config.json: a `chat_template.jinja`, or a
   * `chat_template.json` holding `{"chat_template": …}`. Give the same file the engine uses (vLLM's
   * `--chat-template`, or the repo's chat_template.jinja, which transformers prefers over the config's).
   */
  chatTemplate?: string;
  contentFormat?: ChatTemplateOptions["contentFormat"];
  defaultChatTemplateKwargs?: Record<string, unknown>;
  toolFunctionFields?: readonly string[];
  excludeToolsWhenToolChoiceNone?: boolean;
}

export interface PreciseTokenizerInit {
  model: string;
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  /** Overrides the config's `chat_template`. */
  chatTemplate?: TemplateSource;
  blockSizeHint?: number;
  pieceCacheSize?: number;
  /** Bytes per generation of the encoder's whole-section cache (TokenEncoderOptions.sectionCacheBytes). */
  sectionCacheBytes?: number;
  templateOptions?: Omit<ChatTemplateOptions, "specialTokens">;
}

function asTemplateSource(v: unknown): TemplateSource | undefined {
  if (typeof v === "string") return v;
  if (Array.isArray(v) && v.every((t) => typeof t?.name === "string" && typeof t?.template === "string")) return v;
  return undefined;
}

export class PreciseTokenizer implements PromptTokenizer {
  readonly mode = "precise" as const;
  readonly model: string;
  readonly blockSizeHint: number;
  readonly encoder: TokenEncoder;
  readonly #template: ChatTemplate | null;

  get sections(): { hits: number; misses: number } {
    return this.encoder.sections;
  }

  constructor(init: PreciseTokenizerInit) {
    this.model = init.model;
    this.blockSizeHint = init.blockSizeHint ?? 16;
    let tok: HfTokenizer;
    try {
      tok = new Tokenizer(init.tokenizerJson, init.tokenizerConfig);
    } catch (e) {
      throw new KvgateError("KVGATE_ERR_TOKENIZER", `tokenizer for ${init.model} does not load: ${(e as Error).message}`, { model: init.model }, { cause: e });
    }
    this.encoder = createTokenEncoder(tok, init.tokenizerJson, init.tokenizerConfig, { pieceCacheSize: init.pieceCacheSize, sectionCacheBytes: init.sectionCacheBytes });
    const source = init.chatTemplate ?? asTemplateSource(init.tokenizerConfig.chat_template);
    this.#template = source === undefined ? null : new ChatTemplate(source, { ...init.templateOptions, specialTokens: specialTokenVariables(init.tokenizerConfig) });
  }

  renderChat(body: ChatRequestBody, notes?: TokenizeNotes): string {
    if (!this.#template) {
      throw new KvgateError("KVGATE_ERR_TOKENIZER", `model ${this.model} has no chat template; configure chatTemplate for it`, { model: this.model });
    }
    return this.#template.render(body, notes);
  }

  /** vLLM renders, then encodes with add_special_tokens=false unless the request says otherwise. */
  tokenizeChat(body: ChatRequestBody, notes?: TokenizeNotes): Uint32Array {
    const add = addSpecialTokens(body, false);
    if (notes) notes.batchSize = 1;
    const text = this.renderChat(body, notes);
    return truncateLeft(this.encoder.encode(text, add), body, notes);
  }

  /** vLLM encodes completion prompts with add_special_tokens=true by default; token-id prompts pass as they are. */
  tokenizeCompletion(body: CompletionRequestBody, notes?: TokenizeNotes): Uint32Array {
    if (notes) notes.mediaParts = 0;
    const p = firstPrompt(body, notes);
    const ids = p.ids ?? this.encoder.encode(p.text, addSpecialTokens(body, true));
    return truncateLeft(ids, body, notes);
  }
}

function parseJson(text: string, what: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v === "object" && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch (e) {
    throw new KvgateError("KVGATE_ERR_TOKENIZER", `${what} is not valid JSON: ${(e as Error).message}`, { source: what }, { cause: e });
  }
  throw new KvgateError("KVGATE_ERR_TOKENIZER", `${what} is not a JSON object`, { source: what });
}

/** Reads a model's files through `readText` and builds its tokenizer (seconds for a large vocabulary; cache it). */
export async function loadPreciseTokenizer(
  model: string,
  source: ModelTokenizerSource,
  readText: ReadText,
  opts: { blockSizeHint?: number; pieceCacheSize?: number } = {},
): Promise<PreciseTokenizer> {
  const tjPath = source.tokenizerJson ?? (source.dir ? joinSource(source.dir, "tokenizer.json") : undefined);
  const tcPath = source.tokenizerConfig ?? (source.dir ? joinSource(source.dir, "tokenizer_config.json") : undefined);
  if (!tjPath || !tcPath) {
    throw new KvgateError("KVGATE_ERR_TOKENIZER", `model ${model}: give dir, or both tokenizerJson and tokenizerConfig`, { model });
  }
  const [tj, tc, ct] = await Promise.all([readText(tjPath), readText(tcPath), source.chatTemplate ? readText(source.chatTemplate) : undefined]);
  let chatTemplate: TemplateSource | undefined;
  if (ct !== undefined) {
    chatTemplate = /\.json$/i.test(source.chatTemplate!) ? asTemplateSource(parseJson(ct, source.chatTemplate!).chat_template) : ct;
    if (chatTemplate === undefined) throw new KvgateError("KVGATE_ERR_TOKENIZER", `${source.chatTemplate} holds no chat_template`, { model });
  }
  return new PreciseTokenizer({
    model,
    tokenizerJson: parseJson(tj, tjPath),
    tokenizerConfig: parseJson(tc, tcPath),
    chatTemplate,
    blockSizeHint: opts.blockSizeHint,
    pieceCacheSize: opts.pieceCacheSize,
    templateOptions: {
      contentFormat: source.contentFormat,
      defaultKwargs: source.defaultChatTemplateKwargs,
      toolFunctionFields: source.toolFunctionFields,
      excludeToolsWhenToolChoiceNone: source.excludeToolsWhenToolChoiceNone,
    },
  });
}
