/**
 * @module Renders an OpenAI chat body into prompt text with a model's chat template, as vLLM does with
 * transformers' `apply_chat_template`: template choice, special-token variables, request kwargs, and
 * `continue_final_message` trimming.
 */
import { KvgateError } from "../core/errors.ts";
import { buildConversation, dumpTools, type ContentFormat } from "./conversation.ts";
import { detectContentFormat } from "./content-format.ts";
import { compileTemplate, TemplateRaised, type CompiledTemplate } from "./template-runtime.ts";
import type { ChatRequestBody, TokenizeNotes } from "./types.ts";

/** A tokenizer_config `chat_template`: one template, or named ones ("default", "tool_use", …). */
export type TemplateSource = string | ReadonlyArray<{ name: string; template: string }>;

export interface ChatTemplateOptions {
  /** The tokenizer_config's special tokens (`bos_token`, `eos_token`, …), given to the template as variables. */
  specialTokens?: Record<string, unknown>;
  /** "auto" (default) detects it from the template, like vLLM's `--chat-template-content-format auto`. */
  contentFormat?: "auto" | ContentFormat;
  /** Server-side kwargs under the request's own, like vLLM's `--default-chat-template-kwargs`. */
  defaultKwargs?: Record<string, unknown>;
  /** Declared fields of vLLM's FunctionDefinition for this engine version (see `dumpTools`). */
  toolFunctionFields?: readonly string[];
  excludeToolsWhenToolChoiceNone?: boolean;
  now?: () => Date;
}

interface Entry {
  tpl: CompiledTemplate;
  format: ContentFormat;
}

// vLLM answers 400 for these in chat_template_kwargs; `messages` would collide with the conversation itself.
const FORBIDDEN_KWARGS = ["chat_template", "tokenize", "messages"];

/** The special-token strings transformers exposes to templates (`special_tokens_map`); AddedToken dicts carry `content`. */
export function specialTokenVariables(config: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const str = (v: unknown): string | undefined =>
    typeof v === "string" ? v : typeof v === "object" && v !== null && typeof (v as { content?: unknown }).content === "string" ? (v as { content: string }).content : undefined;
  for (const k of ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]) {
    const s = str(config[k]);
    if (s !== undefined) out[k] = s;
  }
  const extra = config.additional_special_tokens;
  if (Array.isArray(extra) && extra.length) out.additional_special_tokens = extra.map(str).filter((s) => s !== undefined);
  return out;
}

function onlySet(o: Record<string, unknown>): Record<string, unknown> {
  // vLLM's merge_kwargs: None means "not set" and does not override.
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null));
}

/** transformers: cut the text right after the final message's content so generation continues it. */
function continueFinal(rendered: string, conversation: Array<Record<string, unknown>>): string {
  let final: unknown = conversation[conversation.length - 1]?.content;
  if (Array.isArray(final)) final = [...final].reverse().find((p) => typeof p?.text === "string")?.text;
  if (typeof final !== "string") throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "continue_final_message is set but the final message has no text to continue");
  const stripped = final.trim();
  const at = rendered.lastIndexOf(stripped);
  if (at < 0) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "continue_final_message is set but the final message does not appear in the rendered chat");
  const lead = final.trimStart();
  return rendered.slice(0, at + (rendered.slice(at, at + lead.length) === final ? lead.length : stripped.length));
}

export class ChatTemplate {
  readonly #named: Map<string, Entry>;
  readonly #opts: ChatTemplateOptions;

  constructor(source: TemplateSource, opts: ChatTemplateOptions = {}) {
    this.#opts = opts;
    const list = typeof source === "string" ? [{ name: "default", template: source }] : source;
    this.#named = new Map();
    for (const { name, template } of list) {
      let tpl: CompiledTemplate;
      try {
        tpl = compileTemplate(template, opts.now);
      } catch (e) {
        throw new KvgateError("KVGATE_ERR_TOKENIZER", `chat template '${name}' does not parse: ${(e as Error).message}`, undefined, { cause: e });
      }
      const format = !opts.contentFormat || opts.contentFormat === "auto" ? detectContentFormat(template) : opts.contentFormat;
      this.#named.set(name, { tpl, format });
    }
    if (!this.#named.has("default") && !this.#named.has("tool_use")) {
      throw new KvgateError("KVGATE_ERR_TOKENIZER", "named chat templates need a 'default' (or 'tool_use') entry");
    }
  }

  /** transformers' choice among named templates: "tool_use" when tools are passed and it exists, else "default". */
  #pick(hasTools: boolean): Entry {
    const e = (hasTools && this.#named.get("tool_use")) || this.#named.get("default") || this.#named.get("tool_use");
    return e!;
  }

  get contentFormat(): ContentFormat {
    return this.#pick(false).format;
  }

  render(body: ChatRequestBody, notes?: TokenizeNotes): string {
    const agp = body.add_generation_prompt ?? true;
    const cfm = body.continue_final_message ?? false;
    if (typeof agp !== "boolean" || typeof cfm !== "boolean") {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "add_generation_prompt and continue_final_message must be booleans");
    }
    if (agp && cfm) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
    const kw = body.chat_template_kwargs ?? {};
    if (typeof kw !== "object" || Array.isArray(kw)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "chat_template_kwargs must be an object");
    const forbidden = FORBIDDEN_KWARGS.filter((k) => k in kw);
    if (forbidden.length) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `unexpected chat template kwargs from request: ${forbidden.join(", ")}`);

    const tools = dumpTools(body.tools, body.tool_choice, {
      functionFields: this.#opts.toolFunctionFields,
      excludeToolsWhenToolChoiceNone: this.#opts.excludeToolsWhenToolChoiceNone,
    });
    // Same layering as vLLM: server defaults < tools < request kwargs < the request's explicit fields.
    const merged: Record<string, unknown> = {
      ...this.#opts.defaultKwargs,
      tools,
      ...onlySet(kw),
      ...onlySet({ add_generation_prompt: agp, documents: body.documents, reasoning_effort: body.reasoning_effort }),
    };
    // transformers always hands the template `documents` (None when absent) next to the special-token strings.
    const context: Record<string, unknown> = { ...this.#opts.specialTokens, ...merged, documents: merged.documents ?? null };
    const entry = this.#pick(Array.isArray(context.tools) && context.tools.length > 0);
    const { conversation, mediaParts } = buildConversation(body.messages, entry.format);
    if (notes) notes.mediaParts = mediaParts;
    context.messages = conversation;

    let text: string;
    try {
      text = entry.tpl.render(context);
    } catch (e) {
      if (e instanceof KvgateError) throw e;
      if (e instanceof TemplateRaised) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", e.message, { param: "messages" });
      throw new KvgateError("KVGATE_ERR_TOKENIZER", `chat template failed to render: ${(e as Error).message}`, undefined, { cause: e });
    }
    return cfm ? continueFinal(text, conversation) : text;
  }
}
