/**
 * @module The simulated engine's deterministic tokenizer, chat rendering and output filler.
 *
 * The sim tokenizes exactly as kvgate's approximate mode does (src/tokenize/approximate-tokenizer.ts): the chat
 * rendered with one fixed template, its UTF-8 bytes read four at a time as u32 little-endian ids (the last group
 * zero-padded); completions prompts given as text the same way, token-id prompts as they are. Because both sides
 * run the same function, a router in approximate mode computes the very ids (and block hashes) a sim engine caches
 * and reports in its KV events. About one token per four bytes, like English text under real BPE vocabularies.
 */
import { ApproximateTokenizer, bytesToTokens, renderApproximate } from "../tokenize/approximate-tokenizer.ts";
import type { ChatRequestBody, CompletionRequestBody, TokenizeNotes } from "../tokenize/types.ts";

const decoder = new TextDecoder();
const tokenizer = new ApproximateTokenizer();

/** Token ids of a text. */
export function simEncode(text: string): Uint32Array {
  return bytesToTokens(text);
}

/** Text of token ids: their bytes without the zero padding, decoded as UTF-8 (invalid sequences become U+FFFD). */
export function simDecode(tokens: ArrayLike<number>): string {
  const bytes: number[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    for (let k = 0; k < 4; k++) {
      const b = (t >>> (8 * k)) & 0xff;
      if (b !== 0) bytes.push(b);
    }
  }
  return decoder.decode(new Uint8Array(bytes));
}

/** The prompt text the sim builds for a chat body. */
export function renderSimChat(body: ChatRequestBody, notes?: TokenizeNotes): string {
  return renderApproximate(body, notes);
}

/** Token ids of a chat body's prompt. Throws KvgateError (400) on malformed messages. */
export function simChatTokens(body: ChatRequestBody, notes?: TokenizeNotes): Uint32Array {
  return tokenizer.tokenizeChat(body, notes);
}

/** Token ids of a completions body's first prompt (`notes.batchSize` tells how many it held). */
export function simCompletionTokens(body: CompletionRequestBody, notes?: TokenizeNotes): Uint32Array {
  return tokenizer.tokenizeCompletion(body, notes);
}

/** 48 bytes, a multiple of 4, so the filler splits into whole tokens and re-tokenizes to the same ids. */
export const FILLER_TEXT = "The simulated engine writes this filler text.   ";
const FILLER_TOKENS = bytesToTokens(FILLER_TEXT);

/** The `index`-th generated token of any request (output is deterministic filler). */
export function fillerToken(index: number): number {
  return FILLER_TOKENS[index % FILLER_TOKENS.length]!;
}
