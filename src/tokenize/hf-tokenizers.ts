/**
 * @module The part of `@huggingface/tokenizers` kvgate relies on, typed here: the package's own .d.ts files use
 * extensionless relative imports that NodeNext resolution drops, so most of its types arrive as `any`. All of
 * these are exported classes and public members (0.2.x).
 */
import * as hf from "@huggingface/tokenizers";

export interface PreTokenizerLike {
  pre_tokenize_text(text: string, options?: unknown): string[];
  pre_tokenize(text: string | string[], options?: unknown): string[];
}

export interface ByteLevelLike extends PreTokenizerLike {
  use_regex: boolean;
  add_prefix_space: boolean;
  byte_encoder: Record<number, string>;
}

export interface TokenizerModelLike {
  (tokens: string[]): string[];
  tokens_to_ids: Map<string, number>;
  unk_token_id?: number;
}

export interface HfTokenizer {
  encode(text: string, options?: { add_special_tokens?: boolean }): { ids: number[] };
  normalizer: ((text: string) => string) | null;
  pre_tokenizer: (PreTokenizerLike & { tokenizers?: Array<PreTokenizerLike | null> }) | null;
  model: TokenizerModelLike | null;
}

type Ctor = abstract new (...args: never[]) => unknown;

const lib = hf as unknown as Record<string, Ctor> & { Tokenizer: new (json: object, config: object) => HfTokenizer };

export const Tokenizer = lib.Tokenizer;
export const BPE = lib.BPE!;
export const SequencePreTokenizer = lib.SequencePreTokenizer!;
export const ByteLevelPreTokenizer = lib.ByteLevelPreTokenizer!;
export const SplitPreTokenizer = lib.SplitPreTokenizer!;
export const DigitsPreTokenizer = lib.DigitsPreTokenizer!;
export const PunctuationPreTokenizer = lib.PunctuationPreTokenizer!;
