/**
 * @module Acceptance 3: the prompt of a real vLLM capture (Qwen/Qwen3-0.6B) tokenized by kvgate gives exactly the
 * token ids vLLM put in its BlockStored event, and kvgate's core hashes them into the same number of blocks.
 */
import { describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import { Tokenizer } from "../../src/tokenize/hf-tokenizers.ts";
import { EVENT_URL, capturedEvent, qwen3, qwen3Files } from "./helpers.ts";

describe("Qwen3 parity with a real vLLM capture", () => {
  const ev = capturedEvent();

  it("should find the captured event beside the repository", () => {
    expect(existsSync(fileURLToPath(EVENT_URL))).toBe(true);
    expect(ev.model_name).toBe("Qwen/Qwen3-0.6B");
    expect(ev.block_size).toBe(16);
    expect(ev.token_ids).toHaveLength(400);
    expect(ev.block_hashes).toHaveLength(25);
  });

  it("should tokenize the prompt to the event's token ids (the event holds the 25 complete blocks)", () => {
    const ids = qwen3().tokenizeCompletion({ prompt: ev.prompt });
    expect(ids.length).toBe(402);
    expect(Array.from(ids.subarray(0, 400))).toEqual(ev.token_ids);
    expect(Math.floor(ids.length / ev.block_size)).toBe(ev.block_hashes.length);
  });

  it("should give the same ids through the library's own encode (the fast path is not what makes it pass)", () => {
    const { tokenizerJson, tokenizerConfig } = qwen3Files();
    const lib = new Tokenizer(tokenizerJson, tokenizerConfig);
    expect(lib.encode(ev.prompt, { add_special_tokens: true }).ids.slice(0, 400)).toEqual(ev.token_ids);
    expect(qwen3().encoder.fast).toBe(true);
  });

  it("should hash the ids into 25 chained blocks with kvgate's core, matching the event's block count", async () => {
    const index = await createKvIndex({ maxSlots: 4, capacity: 1 << 12, maxPromptTokens: 1 << 12, promptTokens: 1 << 10, approxMaxBlocks: 1 << 10 });
    const ids = qwen3().tokenizeCompletion({ prompt: ev.prompt });
    const full = index.hash(ids, { blockSize: 16 });
    expect(full.seq).toHaveLength(ev.block_hashes.length);
    // The two trailing tokens of the 402 do not form a block, so hashing only the event's 400 gives the same chain.
    const captured = index.hash(Uint32Array.from(ev.token_ids), { blockSize: 16 });
    expect(captured.seq).toEqual(full.seq);
    expect(new Set(full.seq.map(String)).size).toBe(25);
  });

  it("should tokenize the same text as a one-message chat into the template's frame around those ids", () => {
    const ids = Array.from(qwen3().tokenizeChat({ messages: [{ role: "user", content: ev.prompt }], chat_template_kwargs: { enable_thinking: false } }));
    const tok = qwen3().encoder;
    const head = Array.from(tok.encode("<|im_start|>user\n", false));
    expect(ids.slice(0, head.length)).toEqual(head);
    // "user\n" then the prompt: the newline is its own piece, so the prompt's ids follow unchanged.
    expect(ids.slice(head.length, head.length + 400)).toEqual(ev.token_ids);
  });
});
