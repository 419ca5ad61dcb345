/**
 * @module Approximate mode: no model tokenizer. The chat is rendered with one fixed template and its UTF-8 bytes
 * become "tokens" four at a time, so prompts that share a rendered prefix share their leading blocks.
 *
 * What it can match: requests whose rendered text shares a prefix — the same system prompt, tools and earlier
 * turns — byte for byte. Block k covers bytes [4·B·k, 4·B·(k+1)) for block size B, so a shared prefix of L bytes
 * gives floor(L / 4B) equal blocks, wherever the text differs afterwards.
 * What it cannot match: anything the engine reports. These ids are not the engine's tokens, so their hashes never
 * equal a KV event's; a router in this mode must learn only from its own routing decisions (which worker got which
 * prefix) and ignore KV events for matching. Token counts are about bytes/4, not the engine's count.
 *
 * The fixed template (role and content with separators; chat_template_kwargs are ignored):
 *   tools, when present:         "<|tools|>\n" + JSON.stringify(tools) + "\n"
 *   each message:                "<|" + role + "|>\n" + text + "\n"
 *     text = the content string, or its text parts joined with "\n" (media parts add nothing); an assistant's
 *     tool calls follow as "\n<|tool_calls|>" + JSON.stringify(tool_calls)
 *   add_generation_prompt (default true): "<|assistant|>\n"
 */
import { buildConversation } from "./conversation.ts";
import { firstPrompt, truncateLeft } from "./completion-prompt.ts";
import type { ChatRequestBody, CompletionRequestBody, PromptTokenizer, TokenizeNotes } from "./types.ts";

const encoder = new TextEncoder();
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * UTF-8 bytes → uint32 "tokens", 4 bytes each, little-endian; the last one zero-padded. Prompts with the same
 * first 4k bytes have the same first k tokens.
 */
export function bytesToTokens(text: string): Uint32Array {
  const bytes = encoder.encode(text);
  const count = (bytes.length + 3) >>> 2;
  const buf = new Uint8Array(count * 4);
  buf.set(bytes);
  if (LITTLE_ENDIAN) return new Uint32Array(buf.buffer);
  const view = new DataView(buf.buffer);
  const out = new Uint32Array(count);
  for (let i = 0; i < count; i++) out[i] = view.getUint32(i * 4, true);
  return out;
}

/** The fixed rendering described in the module comment. */
export function renderApproximate(body: ChatRequestBody, notes?: TokenizeNotes): string {
  const { conversation, mediaParts } = buildConversation(body?.messages, "string");
  if (notes) notes.mediaParts = mediaParts;
  let out = "";
  if (Array.isArray(body.tools) && body.tools.length > 0) out += `<|tools|>\n${JSON.stringify(body.tools)}\n`;
  for (const m of conversation) {
    out += `<|${m.role as string}|>\n${m.content as string}`;
    if (m.tool_calls) out += `\n<|tool_calls|>${JSON.stringify(m.tool_calls)}`;
    out += "\n";
  }
  if (body.add_generation_prompt ?? true) out += "<|assistant|>\n";
  return out;
}

export class ApproximateTokenizer implements PromptTokenizer {
  readonly mode = "approximate" as const;
  readonly model: string;
  readonly blockSizeHint: number;

  constructor(opts: { model?: string; blockSizeHint?: number } = {}) {
    this.model = opts.model ?? "*";
    this.blockSizeHint = opts.blockSizeHint ?? 16;
  }

  renderChat(body: ChatRequestBody, notes?: TokenizeNotes): string {
    return renderApproximate(body, notes);
  }

  tokenizeChat(body: ChatRequestBody, notes?: TokenizeNotes): Uint32Array {
    if (notes) notes.batchSize = 1;
    return truncateLeft(bytesToTokens(renderApproximate(body, notes)), {}, notes);
  }

  /** Token-id prompts keep their ids (they already are a deterministic function of the prompt). */
  tokenizeCompletion(body: CompletionRequestBody, notes?: TokenizeNotes): Uint32Array {
    if (notes) notes.mediaParts = 0;
    const p = firstPrompt(body, notes);
    return truncateLeft(p.ids ?? bytesToTokens(p.text), {}, notes);
  }
}
