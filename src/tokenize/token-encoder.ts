/**
 * @module Encodes text to token ids with `@huggingface/tokenizers`, plus a cached fast path for byte-level BPE
 * tokenizers (Qwen2/2.5/3, Llama 3, DeepSeek…) that gives the same ids at a fraction of the cost.
 *
 * Why the fast path is exact: the tokenizer first cuts the text at added tokens (`<|im_start|>`, `<think>`…);
 * each section is normalized, split by the pre-tokenizer's regex into pieces, and BPE runs on each piece alone.
 * No merge crosses a piece boundary, so a piece's ids depend only on the piece, and a cache keyed by piece text
 * is exact. (Caching a *prefix*'s ids — say the system prompt's — is not: the regex split and the BPE merges at
 * its end depend on what follows, e.g. "\n" + "\n" become one token. Caching is only safe at boundaries the
 * tokenizer itself never crosses: added tokens, and pieces once the whole section has been split.)
 * Most of the library's time goes to mapping each piece to byte-level characters; a cache hit skips that and BPE,
 * and a miss runs kvgate's own merge loop (`bpe-merge.ts`), which gives the same tokens several times faster.
 * Whole sections are cached too (by their final text, after lstrip/rstrip): a chat template puts added tokens around
 * every message, so a conversation's next turn finds each earlier message's ids at once, with no regex split.
 */
import {
  BPE,
  ByteLevelPreTokenizer,
  DigitsPreTokenizer,
  PunctuationPreTokenizer,
  SequencePreTokenizer,
  SplitPreTokenizer,
  type ByteLevelLike,
  type HfTokenizer,
  type PreTokenizerLike,
} from "./hf-tokenizers.ts";
import { BpeMerger } from "./bpe-merge.ts";
import { PieceCache } from "./piece-cache.ts";
import { detach } from "./detach-string.ts";

export interface TokenEncoder {
  encode(text: string, addSpecialTokens: boolean): Uint32Array;
  /** True when the cached byte-level path is in use; false means every call goes through the library. */
  readonly fast: boolean;
  /** Sections (text between added tokens, ≥ 64 chars) found in the section cache, and encoded (fast path only). */
  readonly sections: { hits: number; misses: number };
}

type Json = Record<string, any>;

interface FastParts {
  addedRe: RegExp | null;
  added: Map<string, { id: number; lstrip: boolean; rstrip: boolean }>;
  stages: PreTokenizerLike[];
  byteLevel: ByteLevelLike;
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The pieces of the pipeline the fast path reproduces, or null when this tokenizer needs the library's path. */
function fastParts(tok: HfTokenizer, json: Json, config: Json): FastParts | null {
  const m = json.model ?? {};
  if (!(tok.model instanceof BPE) || m.dropout || m.fuse_unk) return null;
  if (config.remove_space === true || config.do_lowercase_and_remove_accent) return null;
  const pre = tok.pre_tokenizer;
  if (!pre || !(pre instanceof SequencePreTokenizer)) return null;
  const all = pre.tokenizers ?? [];
  const last = all[all.length - 1] as ByteLevelLike | null | undefined;
  if (!last || !(last instanceof ByteLevelPreTokenizer) || last.use_regex || last.add_prefix_space) return null;
  const stages = all.slice(0, -1);
  // Only stages that are a pure function of their input text (no section-index or prefix-space behaviour).
  const pure = (s: unknown) => s instanceof SplitPreTokenizer || s instanceof DigitsPreTokenizer || s instanceof PunctuationPreTokenizer;
  if (stages.length === 0 || !stages.every(pure)) return null;
  const added = new Map<string, { id: number; lstrip: boolean; rstrip: boolean }>();
  for (const t of (json.added_tokens ?? []) as Json[]) {
    const normalized = t.normalized ?? !t.special;
    // Tokens matched after normalization take a second splitting pass we do not reproduce.
    if (normalized && tok.normalizer !== null) return null;
    added.set(t.content, { id: t.id, lstrip: !!t.lstrip, rstrip: !!t.rstrip });
  }
  // Leftmost match, longest first at that position: the same cut the library's trie makes.
  const alts = [...added.keys()].sort((a, b) => b.length - a.length).map(escapeRe);
  return { addedRe: alts.length ? new RegExp(alts.join("|"), "g") : null, added, stages: stages as PreTokenizerLike[], byteLevel: last };
}

/** ids the post-processor puts around a single sequence (BOS for Llama 3, nothing for Qwen), found by probing. */
function specialsAround(tok: HfTokenizer): { prefix: number[]; suffix: number[] } | null {
  let found: { prefix: number[]; suffix: number[] } | null = null;
  for (const probe of ["a", "Hello world, 12 + 3!"]) {
    const bare = tok.encode(probe, { add_special_tokens: false }).ids;
    const full = tok.encode(probe, { add_special_tokens: true }).ids;
    const at = full.findIndex((_: number, i: number) => bare.every((v: number, j: number) => full[i + j] === v));
    if (at < 0 || bare.length === 0) return null;
    const r = { prefix: full.slice(0, at), suffix: full.slice(at + bare.length) };
    if (found && (found.prefix.join() !== r.prefix.join() || found.suffix.join() !== r.suffix.join())) return null;
    found = r;
  }
  return found;
}

export interface TokenEncoderOptions {
  /** Pieces cached per generation (two generations are kept). Default 65,536. */
  pieceCacheSize?: number;
  /** Run cache misses through the library's BPE instead of kvgate's merge loop (for differential tests). */
  libraryMerges?: boolean;
  /** Bytes of whole sections' ids kept per generation (two generations); 0 turns the section cache off. Default 4 MiB. */
  sectionCacheBytes?: number;
}

/** Sections shorter than this go through the piece cache alone: a Map lookup by the section saves little there. */
const MIN_SECTION = 64;


export function createTokenEncoder(tok: HfTokenizer, tokenizerJson: Json, tokenizerConfig: Json, opts: TokenEncoderOptions = {}): TokenEncoder {
  const slow = (text: string, add: boolean): Uint32Array => {
    const ids = tok.encode(text, { add_special_tokens: add }).ids;
    return Uint32Array.from(ids);
  };
  const parts = fastParts(tok, tokenizerJson, tokenizerConfig);
  if (!parts) return { encode: slow, fast: false, sections: { hits: 0, misses: 0 } };
  const specials = specialsAround(tok);
  const { addedRe, added, stages, byteLevel } = parts;
  const vocab = tok.model!.tokens_to_ids;
  const unk = tok.model!.unk_token_id;
  const model = tok.model!;
  const normalizer = tok.normalizer;
  const cache = new PieceCache<number | Uint32Array>(opts.pieceCacheSize ?? 1 << 16);
  const sectionBytes = opts.sectionCacheBytes ?? 4 << 20;
  const sectionCache = sectionBytes > 0 ? new PieceCache<Uint32Array>(sectionBytes, (k, v) => 2 * k.length + v.byteLength + 64) : null;
  const sectionStats = { hits: 0, misses: 0 };
  // Misses go through our merge loop when the model allows it, else through the library's model.
  const merger = opts.libraryMerges ? null : BpeMerger.create(tokenizerJson.model ?? {}, vocab, byteLevel.byte_encoder);
  let out = new Uint32Array(4096);
  let n = 0;
  const push = (id: number) => {
    if (n === out.length) {
      const grown = new Uint32Array(out.length * 2);
      grown.set(out);
      out = grown;
    }
    out[n++] = id;
  };

  /** ids of one piece: a cache hit, or byte-level mapping + BPE once. Undefined when a token has no id. */
  const pieceIds = (piece: string): number | Uint32Array | undefined => {
    const hit = cache.get(piece);
    if (hit !== undefined) return hit;
    let ids: Uint32Array | undefined;
    if (merger) {
      ids = merger.encode(piece);
    } else {
      const toks = model(byteLevel.pre_tokenize_text(piece));
      ids = new Uint32Array(toks.length);
      for (let i = 0; i < toks.length; i++) {
        const id = vocab.get(toks[i]!) ?? unk;
        if (id === undefined) return undefined;
        ids[i] = id;
      }
    }
    if (ids === undefined) return undefined;
    const v = ids.length === 1 ? ids[0]! : ids;
    if (piece.length <= 256) cache.set(detach(piece), v);
    return v;
  };

  const encodeSection = (section: string): boolean => {
    const norm = normalizer ? normalizer(section) : section;
    if (norm.length === 0) return true;
    let pieces: string[] = [norm];
    for (const st of stages) pieces = pieces.length === 1 ? st.pre_tokenize_text(pieces[0]!) : st.pre_tokenize(pieces);
    for (const p of pieces) {
      if (p.length === 0) continue;
      const ids = pieceIds(p);
      if (ids === undefined) return false;
      if (typeof ids === "number") push(ids);
      else for (let i = 0; i < ids.length; i++) push(ids[i]!);
    }
    return true;
  };

  const fastEncode = (text: string, add: boolean): Uint32Array => {
    if (add && !specials) return slow(text, add);
    n = 0;
    if (add) for (const id of specials!.prefix) push(id);
    const sections: string[] = [];
    if (addedRe) {
      let prev = 0;
      for (const mt of text.matchAll(addedRe)) {
        if (mt.index > prev) sections.push(text.slice(prev, mt.index));
        sections.push(mt[0]);
        prev = mt.index + mt[0].length;
      }
      if (prev < text.length) sections.push(text.slice(prev));
    } else {
      sections.push(text);
    }
    // lstrip/rstrip added tokens swallow the whitespace next to them (same order of edits as the library).
    for (let i = 0; i < sections.length; i++) {
      const a = added.get(sections[i]!);
      if (!a) continue;
      if (a.lstrip && i > 0) sections[i - 1] = sections[i - 1]!.trimEnd();
      if (a.rstrip && i < sections.length - 1) sections[i + 1] = sections[i + 1]!.trimStart();
    }
    for (const s of sections) {
      if (s.length === 0) continue;
      const a = added.get(s);
      if (a) push(a.id);
      else if (sectionCache && s.length >= MIN_SECTION) {
        const hit = sectionCache.get(s);
        if (hit) {
          sectionStats.hits++;
          for (let i = 0; i < hit.length; i++) push(hit[i]!);
          continue;
        }
        sectionStats.misses++;
        const start = n;
        if (!encodeSection(s)) return slow(text, add);
        sectionCache.set(detach(s), out.slice(start, n));
      } else if (!encodeSection(s)) return slow(text, add);
    }
    if (add) for (const id of specials!.suffix) push(id);
    return out.slice(0, n);
  };
  return { encode: fastEncode, fast: true, sections: sectionStats };
}
