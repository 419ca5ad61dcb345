import { describe, expect, it } from "vitest";
import { ChunkScanner, scanEvent, tokenChunk } from "../../src/gateway/chunk-scan.ts";
import { inspectEvent } from "../../src/gateway/stream-events.ts";

const ev = (data: string) => ({ raw: new TextEncoder().encode(`data: ${data}\n\n`), data });
/** inspectEvent's answer without the parsed object (scanEvent leaves it out on its fast path). */
const full = (data: string) => {
  const { json: _json, ...rest } = inspectEvent(ev(data));
  return rest;
};
const scanned = (data: string) => {
  const { json: _json, ...rest } = scanEvent(ev(data));
  return rest;
};

const vllm = (content: string) => JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content }, logprobs: null, finish_reason: null }] });
const sglang = (content: string) => JSON.stringify({ id: "1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { role: null, content, reasoning_content: null, tool_calls: null }, logprobs: null, finish_reason: null, matched_stop: null }], usage: null });
const completion = (text: string) => JSON.stringify({ id: "cmpl-1", object: "text_completion", created: 1, model: "m", choices: [{ index: 0, text, logprobs: null, finish_reason: null, stop_reason: null }] });

describe("scanEvent", () => {
  it("reads ordinary token chunks without parsing, with the same answer as inspectEvent", () => {
    for (const d of [vllm(" hello"), sglang("world"), completion(" text"), vllm(""), sglang("")]) {
      expect(tokenChunk(d), d).toBeDefined();
      expect(scanned(d)).toEqual(full(d));
    }
  });

  it("decodes escapes and non-ASCII text exactly", () => {
    for (const s of ['say "hi"', "a\\b", "line\nnext\ttab", "\u00e9\u4e2d\ud83d\ude00", "\\", '\\"', "end\\\\", "\u0001"]) {
      for (const d of [vllm(s), sglang(s), completion(s)]) {
        expect(scanned(d).text).toBe(s);
        expect(scanned(d)).toEqual(full(d));
      }
    }
  });

  it("agrees with inspectEvent on random text (seeded)", () => {
    let seed = 12345;
    const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
    const alphabet = ['"', "\\", "a", " ", "\n", ",", ":", "{", "}", "[", "]", "é", "\u2028", "null", '"content":"', '"usage":{'];
    for (let i = 0; i < 2000; i++) {
      let s = "";
      for (let n = Math.floor(rnd() * 12); n > 0; n--) s += alphabet[Math.floor(rnd() * alphabet.length)];
      for (const d of [vllm(s), sglang(s), completion(s)]) expect(scanned(d)).toEqual(full(d));
    }
  });

  it("parses whole every chunk that is not an ordinary token chunk", () => {
    const chunks = [
      JSON.stringify({ id: "x", choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] }),
      JSON.stringify({ id: "x", choices: [{ index: 0, delta: { content: "" }, finish_reason: "stop" }] }),
      JSON.stringify({ id: "x", choices: [], usage: { prompt_tokens: 5, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 0 } } }),
      JSON.stringify({ id: "x", choices: [{ index: 0, delta: { content: "a" }, finish_reason: null }], usage: { prompt_tokens: 1 } }),
      JSON.stringify({ id: "x", choices: [{ index: 1, delta: { content: "b" }, finish_reason: null }] }),
      JSON.stringify({ id: "x", choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: "{}" } }] }, finish_reason: null }] }),
      JSON.stringify({ id: "x", choices: [{ index: 0, delta: { reasoning_content: "think" }, finish_reason: null }] }),
      JSON.stringify({ id: "x", choices: [{ index: 0, delta: { content: "a" }, logprobs: { content: [{ token: "a" }] }, finish_reason: null }] }),
      JSON.stringify({ error: { message: "boom", code: 500 } }),
      "[DONE]", "not json", "{broken", '{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]',
    ];
    for (const d of chunks) {
      expect(tokenChunk(d), d).toBeUndefined();
      expect(scanned(d)).toEqual(full(d));
    }
    expect(scanned(chunks[2]!).usageOnly).toBe(true);
    expect(scanned(chunks[5]!).unmigratable).toBe("tool calls");
    expect(scanEvent(ev(chunks[8]!)).kind).toBe("error");
  });
});

describe("ChunkScanner", () => {
  it("answers as inspectEvent over random streams whose chunks repeat one template, change it, or break it (seeded)", () => {
    let seed = 777;
    const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
    const pieces = ['"', "\\", "a", " ", "\n", "é", "\u0001", "\u2028", "tok", '\\"', ""];
    const text = () => {
      let s = "";
      for (let n = Math.floor(rnd() * 4); n > 0; n--) s += pieces[Math.floor(rnd() * pieces.length)];
      return s;
    };
    const shapes = [
      (t: string, id: string) => JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: t }, logprobs: null, finish_reason: null }] }),
      (t: string, id: string) => JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { role: null, content: t, reasoning_content: null, tool_calls: null }, logprobs: null, finish_reason: null }], usage: null }),
      (t: string, id: string) => JSON.stringify({ id, object: "text_completion", created: 1, model: "m", choices: [{ index: 0, text: t, logprobs: null, finish_reason: null }] }),
      // Same prefix as the first shape, another end: a finish reason, or usage beside the text.
      (t: string, id: string) => JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: t }, logprobs: null, finish_reason: "stop" }] }),
      (t: string, id: string) => JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: t }, logprobs: null, finish_reason: null }], usage: { prompt_tokens: 3 } }),
      (t: string, id: string) => JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: t, tool_calls: [{ index: 0 }] }, finish_reason: null }] }),
    ];
    let fast = 0;
    for (let stream = 0; stream < 300; stream++) {
      const scanner = new ChunkScanner();
      const ids = ["a", "b", `c${stream}`];
      for (let i = 0; i < 30; i++) {
        const shape = rnd() < 0.8 ? shapes[stream % 3]! : shapes[Math.floor(rnd() * shapes.length)]!;
        const d = shape(text(), ids[Math.floor(rnd() * ids.length)]!);
        const { json: _json, ...got } = scanner.scan(ev(d));
        expect(got, d).toEqual(full(d));
        if (got.kind === "chunk" && tokenChunk(d) !== undefined) fast++;
      }
    }
    expect(fast).toBeGreaterThan(3000);
  });
});
