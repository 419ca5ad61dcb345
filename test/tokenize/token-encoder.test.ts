/** @module The cached byte-level fast path against the library's own encode: same ids on real and hostile text. */
import { describe, expect, it } from "vitest";
import { Tokenizer } from "../../src/tokenize/hf-tokenizers.ts";
import { createTokenEncoder } from "../../src/tokenize/token-encoder.ts";
import { capturedEvent, qwen3Files } from "./helpers.ts";
import { tinyTokenizerConfig, tinyTokenizerJson } from "./tiny-tokenizer.ts";

// Pieces that stress the split regex, NFC, surrogate pairs, contractions, whitespace runs and added tokens.
const ALPHABET = [
  "a", "b", " ", "  ", "\n", "\n\n", "\t", "'s", "'T", "'ll", "1", "23", "é", "e\u0301", "中文", "\u{1F600}", ".", "!!",
  "<|im_start|>", "<think>", "<|im_end|>", "</tool_call>", "\r\n", "ü", "Ω", "—", "\u00a0", "\u200b", "x", "Hello", " world", "<|im_", "|>",
];

function randomTexts(count: number, seed: number): string[] {
  let s = seed >>> 0;
  const rnd = () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const out: string[] = [];
  for (let k = 0; k < count; k++) {
    let t = "";
    const len = 1 + Math.floor(rnd() * 40);
    for (let i = 0; i < len; i++) t += ALPHABET[Math.floor(rnd() * ALPHABET.length)];
    out.push(t);
  }
  return out;
}

describe("token encoder", () => {
  const files = qwen3Files();
  const lib = new Tokenizer(files.tokenizerJson, files.tokenizerConfig);
  const enc = createTokenEncoder(lib, files.tokenizerJson, files.tokenizerConfig, { pieceCacheSize: 64 });

  it("should take the fast path for Qwen3", () => {
    expect(enc.fast).toBe(true);
  });

  it("should give the library's ids for 2,000 random hostile strings, with and without special tokens", () => {
    const texts = ["", capturedEvent().prompt, ...randomTexts(2000, 7)];
    for (const t of texts) {
      for (const add of [false, true]) expect(Array.from(enc.encode(t, add)), JSON.stringify(t)).toEqual(lib.encode(t, { add_special_tokens: add }).ids);
    }
  });

  it("should merge never-seen words, long runs and uncacheable pieces exactly as the library does", () => {
    let s = 99;
    const rnd = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
    const word = (n: number) => Array.from({ length: n }, () => String.fromCharCode(97 + Math.floor(rnd() * 26))).join("");
    const texts = Array.from({ length: 300 }, (_, i) => Array.from({ length: 20 }, () => " " + word(1 + Math.floor(rnd() * 14))).join("") + " " + word(i));
    texts.push("a".repeat(700), " ".repeat(300) + "x", "1234567890".repeat(40), "\u4e2d\u6587".repeat(200), "é".repeat(300));
    const libMerges = createTokenEncoder(lib, files.tokenizerJson, files.tokenizerConfig, { libraryMerges: true });
    for (const t of texts) {
      const want = lib.encode(t, { add_special_tokens: false }).ids;
      expect(Array.from(enc.encode(t, false))).toEqual(want);
      expect(Array.from(libMerges.encode(t, false))).toEqual(want);
    }
  });

  it("should honour ignore_merges (whole-word vocabulary hits, as in Llama 3)", () => {
    const base = tinyTokenizerJson();
    const model = base.model as Record<string, unknown>;
    const json = { ...base, model: { ...model, ignore_merges: true, vocab: { ...(model.vocab as object), "Ġworld": 999 } } };
    const cfg = tinyTokenizerConfig();
    const tiny = new Tokenizer(json, cfg);
    const e = createTokenEncoder(tiny, json, cfg);
    for (const t of ["hello world", " world", "worlds world", ...randomTexts(200, 5)]) {
      expect(Array.from(e.encode(t, false)), JSON.stringify(t)).toEqual(tiny.encode(t, { add_special_tokens: false }).ids);
    }
    expect(Array.from(e.encode(" world", false))).toEqual([999]);
  });

  it("should stay exact when the piece cache is tiny and rotates constantly", () => {
    const t = capturedEvent().prompt;
    const first = Array.from(enc.encode(t, false));
    for (const r of randomTexts(50, 3)) enc.encode(r, false);
    expect(Array.from(enc.encode(t, false))).toEqual(first);
  });

  it("should give the library's ids on a conversation's turns, whole messages coming from the section cache", () => {
    // Qwen3's chat layout: every message between <|im_start|> and <|im_end|>, so each is a section of its own.
    const sectioned = createTokenEncoder(lib, files.tokenizerJson, files.tokenizerConfig, { sectionCacheBytes: 64 << 10 });
    const hostile = randomTexts(60, 17).map((t) => t.replace(/<\|im_(start|end)\|>/g, ""));
    let chat = "<|im_start|>system\nYou are a careful assistant. Answer in full sentences, cite sources.   \n\n<|im_end|>\n";
    for (let turn = 0; turn < 30; turn++) {
      chat += `<|im_start|>user\n${hostile[2 * turn]} question ${turn}: ${"why ".repeat(turn % 7 + 10)}${hostile[2 * turn + 1]}<|im_end|>\n`;
      const prompt = chat + "<|im_start|>assistant\n";
      for (let again = 0; again < 2; again++) {
        expect(Array.from(sectioned.encode(prompt, false)), `turn ${turn}`).toEqual(lib.encode(prompt, { add_special_tokens: false }).ids);
      }
      chat += `<|im_start|>assistant\n${"Because ".repeat(turn % 5 + 8)}${hostile[turn]}<|im_end|>\n`;
    }
    // Every turn after the first finds the earlier messages (64 KiB hold this whole conversation).
    expect(sectioned.sections.hits).toBeGreaterThan(10 * sectioned.sections.misses);
    const off = createTokenEncoder(lib, files.tokenizerJson, files.tokenizerConfig, { sectionCacheBytes: 0 });
    off.encode(chat, false);
    expect(off.sections).toEqual({ hits: 0, misses: 0 });
  });

  it("should stay exact when the section cache is small and rotates constantly", () => {
    const tiny = createTokenEncoder(lib, files.tokenizerJson, files.tokenizerConfig, { sectionCacheBytes: 1024 });
    const texts = Array.from({ length: 40 }, (_, i) => `<|im_start|>user\n${"long message number ".repeat(3 + (i % 9))}${i}<|im_end|>\n`);
    for (let round = 0; round < 3; round++) {
      for (const t of texts) {
        const want = lib.encode(t, { add_special_tokens: false }).ids;
        for (let again = 0; again < 2; again++) expect(Array.from(tiny.encode(t, false))).toEqual(want);
      }
    }
    // The second of each pair hits; the next round misses again (a generation holds two or three of these).
    expect(tiny.sections.hits).toBe(120);
    expect(tiny.sections.misses).toBe(120);
  });

  it("should return a fresh array each call (callers may keep it)", () => {
    const a = enc.encode("hello world", false);
    const b = enc.encode("other text", false);
    expect(Array.from(a)).toEqual(lib.encode("hello world", { add_special_tokens: false }).ids);
    expect(a.buffer).not.toBe(b.buffer);
  });

  it("should add a BOS exactly as a TemplateProcessing post-processor does", () => {
    const json = tinyTokenizerJson({ bos: true, normalizer: true });
    const cfg = tinyTokenizerConfig();
    const tiny = new Tokenizer(json, cfg);
    const e = createTokenEncoder(tiny, json, cfg);
    expect(e.fast).toBe(true);
    for (const t of ["hello world", "<|start|>user\nhello<|end|>\n", ...randomTexts(300, 11)]) {
      for (const add of [false, true]) expect(Array.from(e.encode(t, add)), JSON.stringify(t)).toEqual(tiny.encode(t, { add_special_tokens: add }).ids);
    }
    expect(e.encode("hello", true)[0]).toBe(e.encode("<s>", false)[0]);
  });

  it("should fall back to the library when the pre-tokenizer is not split + byte-level", () => {
    const json = { ...tinyTokenizerJson(), pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: true } };
    const cfg = tinyTokenizerConfig();
    const tiny = new Tokenizer(json, cfg);
    const e = createTokenEncoder(tiny, json, cfg);
    expect(e.fast).toBe(false);
    expect(Array.from(e.encode("hello world", false))).toEqual(tiny.encode("hello world", { add_special_tokens: false }).ids);
  });
});
