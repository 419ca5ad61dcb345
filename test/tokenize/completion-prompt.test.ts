/** @module Completions prompts in every OpenAI shape, special-token defaults, and vLLM's left truncation. */
import { describe, expect, it } from "vitest";
import { addSpecialTokens, firstPrompt, truncateLeft } from "../../src/tokenize/completion-prompt.ts";
import { emptyNotes, type CompletionRequestBody } from "../../src/tokenize/types.ts";
import { qwen3 } from "./helpers.ts";

describe("completion prompts", () => {
  it("should take a string, a token array, or the first of a batch", () => {
    const notes = emptyNotes();
    expect(firstPrompt({ prompt: "hi" }, notes)).toEqual({ text: "hi" });
    expect(notes.batchSize).toBe(1);
    expect(Array.from(firstPrompt({ prompt: [1, 2, 3] }).ids!)).toEqual([1, 2, 3]);
    expect(firstPrompt({ prompt: ["a", "b", "c"] }, notes)).toEqual({ text: "a" });
    expect(notes.batchSize).toBe(3);
    expect(Array.from(firstPrompt({ prompt: [[9, 8], [7]] }, notes).ids!)).toEqual([9, 8]);
    expect(notes.batchSize).toBe(2);
  });

  it("should reject empty or malformed prompts with a 400", () => {
    const bad = [{ prompt: [] }, { prompt: [[]] }, { prompt: [1.5] }, { prompt: [-1] }, { prompt: 42 }, { prompt: [{}] }, {}];
    for (const body of bad) {
      expect(() => firstPrompt(body as unknown as CompletionRequestBody)).toThrow(expect.objectContaining({ code: "KVGATE_ERR_BAD_ARGUMENT", status: 400 }));
    }
  });

  it("should default add_special_tokens per endpoint and accept only booleans", () => {
    expect(addSpecialTokens({}, true)).toBe(true);
    expect(addSpecialTokens({}, false)).toBe(false);
    expect(addSpecialTokens({ add_special_tokens: false }, true)).toBe(false);
    expect(() => addSpecialTokens({ add_special_tokens: "yes" }, true)).toThrow(expect.objectContaining({ status: 400 }));
  });

  it("should keep the last k tokens for truncate_prompt_tokens and leave -1 to the engine", () => {
    const ids = Uint32Array.from([1, 2, 3, 4, 5]);
    const notes = emptyNotes();
    expect(Array.from(truncateLeft(ids, { truncate_prompt_tokens: 2 }, notes))).toEqual([4, 5]);
    expect(notes.truncated).toBe(3);
    expect(truncateLeft(ids, { truncate_prompt_tokens: -1 })).toBe(ids);
    expect(truncateLeft(ids, { truncate_prompt_tokens: 10 })).toBe(ids);
    expect(() => truncateLeft(ids, { truncate_prompt_tokens: 0 })).toThrow(expect.objectContaining({ status: 400 }));
  });

  it("should encode a precise completions prompt and pass token ids through untouched", () => {
    const tok = qwen3();
    expect(Array.from(tok.tokenizeCompletion({ prompt: "Hello world" }))).toEqual([9707, 1879]);
    expect(Array.from(tok.tokenizeCompletion({ prompt: [[1, 2, 3], [4]] }))).toEqual([1, 2, 3]);
    expect(Array.from(tok.tokenizeCompletion({ prompt: "Hello world", truncate_prompt_tokens: 1 }))).toEqual([1879]);
  });
});
