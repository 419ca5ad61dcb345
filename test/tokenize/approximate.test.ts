/** @module Approximate mode: the fixed rendering, byte chunking, determinism, and the shared-prefix → shared-blocks property. */
import { describe, expect, it } from "vitest";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import { ApproximateTokenizer, bytesToTokens, renderApproximate } from "../../src/tokenize/approximate-tokenizer.ts";
import { emptyNotes, type ChatRequestBody } from "../../src/tokenize/types.ts";

const SYSTEM = "You are a careful assistant. ".repeat(20);

function conversation(turns: string[]): ChatRequestBody {
  return { messages: [{ role: "system", content: SYSTEM }, ...turns.map((t, i) => ({ role: i % 2 ? "assistant" : "user", content: t }))] };
}

describe("approximate tokenizer", () => {
  const tok = new ApproximateTokenizer({ blockSizeHint: 16 });

  it("should render with the documented fixed template", () => {
    const body: ChatRequestBody = {
      messages: [
        { role: "system", content: "S" },
        { role: "user", content: [{ type: "text", text: "a" }, { type: "image_url", image_url: { url: "u" } }, { type: "text", text: "b" }] },
        { role: "assistant", content: null, tool_calls: [{ id: "1", type: "function", function: { name: "f", arguments: '{"x":1}' } }] },
      ],
      tools: [{ type: "function", function: { name: "f" } }],
    };
    const notes = emptyNotes();
    expect(renderApproximate(body, notes)).toBe(
      '<|tools|>\n[{"type":"function","function":{"name":"f"}}]\n' +
        "<|system|>\nS\n" +
        "<|user|>\na\nb\n" +
        '<|assistant|>\n\n<|tool_calls|>[{"id":"1","type":"function","function":{"name":"f","arguments":{"x":1}}}]\n' +
        "<|assistant|>\n",
    );
    expect(notes.mediaParts).toBe(1);
    expect(renderApproximate({ ...body, tools: [], add_generation_prompt: false })).not.toContain("<|tools|>");
  });

  it("should pack UTF-8 bytes four to a token, little-endian, zero-padding the last", () => {
    expect(Array.from(bytesToTokens("abcd"))).toEqual([0x64636261]);
    expect(Array.from(bytesToTokens("abcde"))).toEqual([0x64636261, 0x65]);
    expect(Array.from(bytesToTokens("é"))).toEqual([0xa9c3]);
    expect(bytesToTokens("")).toHaveLength(0);
  });

  it("should be deterministic across calls and instances", () => {
    const body = conversation(["Hi", "Hello", "More"]);
    expect(Array.from(tok.tokenizeChat(body))).toEqual(Array.from(new ApproximateTokenizer().tokenizeChat(structuredClone(body))));
  });

  it("should give a follow-up turn every complete block of the earlier turn's shared rendered prefix", async () => {
    const first = conversation(["What is a KV cache?"]);
    const second = conversation(["What is a KV cache?", "It stores attention keys and values.", "And prefix caching?"]);
    const a = renderApproximate(first), b = renderApproximate(second);
    let shared = 0;
    while (shared < a.length && a[shared] === b[shared]) shared++;
    // Only the generation prompt differs: "<|assistant|>\n" then content vs end of text.
    const sharedBytes = new TextEncoder().encode(a.slice(0, shared)).length;
    const index = await createKvIndex({ maxSlots: 4, capacity: 1 << 12, maxPromptTokens: 1 << 12, promptTokens: 1 << 10, approxMaxBlocks: 1 << 10 });
    const ha = index.hash(tok.tokenizeChat(first), { blockSize: 16 }).seq;
    const hb = index.hash(tok.tokenizeChat(second), { blockSize: 16 }).seq;
    const equal = ha.findIndex((h, i) => h !== hb[i]);
    const common = equal < 0 ? ha.length : equal;
    expect(common).toBe(Math.floor(sharedBytes / 64));
    expect(common).toBeGreaterThan(8);
  });

  it("should route a completions batch on its first prompt and keep token-id prompts as they are", () => {
    const notes = emptyNotes();
    expect(Array.from(tok.tokenizeCompletion({ prompt: ["abcd", "zzzz"] }, notes))).toEqual([0x64636261]);
    expect(notes.batchSize).toBe(2);
    expect(Array.from(tok.tokenizeCompletion({ prompt: [5, 6, 7] }))).toEqual([5, 6, 7]);
  });
});
