import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { FILLER_TEXT, simChatTokens, simEncode } from "../../src/sim/sim-tokenizer.ts";

let sim: SimServer;
const MODEL = "sim-model";

beforeAll(async () => {
  sim = await startSimServer({ model: MODEL, numGpuBlocks: 512, speedupRatio: 200, maxModelLen: 4096 });
});
afterAll(async () => {
  await sim?.close();
});

const post = (path: string, body: unknown, init: RequestInit = {}) =>
  fetch(sim.url + path, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body), ...init });

/** The `data:` payloads of an SSE body, in order. */
async function sse(res: Response): Promise<string[]> {
  const text = await res.text();
  expect(text.endsWith("\n\n")).toBe(true);
  return text.split("\n\n").filter((e) => e.length > 0).map((e) => {
    expect(e.startsWith("data: ")).toBe(true);
    return e.slice(6);
  });
}

const longText = "You are a helpful assistant. Answer briefly and cite sources. ".repeat(20);
const chatBody = (extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "system", content: longText }, { role: "user", content: "Hi there" }], max_tokens: 5, ...extra });

describe("sim HTTP: chat completions", () => {
  it("should answer a non-streaming chat with usage, and report cached tokens on a repeat", async () => {
    const prompt = simChatTokens(chatBody()).length;
    const first = await (await post("/v1/chat/completions", chatBody())).json();
    expect(first).toMatchObject({
      object: "chat.completion", model: MODEL,
      choices: [{ index: 0, message: { role: "assistant", content: FILLER_TEXT.slice(0, 20) }, finish_reason: "length" }],
      usage: { prompt_tokens: prompt, completion_tokens: 5, total_tokens: prompt + 5, prompt_tokens_details: { cached_tokens: 0 } },
    });
    expect(first.id).toMatch(/^chatcmpl-/);
    const second = await (await post("/v1/chat/completions", chatBody())).json();
    expect(second.usage.prompt_tokens_details.cached_tokens).toBe(Math.floor((prompt - 1) / 16) * 16);
    expect(second.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
  });

  it("should stream chat chunks in vLLM's format, ending with the usage chunk and [DONE]", async () => {
    const res = await post("/v1/chat/completions", chatBody({ stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "stream me" }] }));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const data = await sse(res);
    expect(data[data.length - 1]).toBe("[DONE]");
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    expect(chunks).toHaveLength(1 + 5 + 1);
    expect(chunks[0]).toMatchObject({ object: "chat.completion.chunk", model: MODEL, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] });
    const pieces = chunks.slice(1, 6);
    expect(pieces.map((c) => c.choices[0].delta.content).join("")).toBe(FILLER_TEXT.slice(0, 20));
    expect(pieces.map((c) => c.choices[0].finish_reason)).toEqual([null, null, null, null, "length"]);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    const prompt = simChatTokens({ messages: [{ role: "user", content: "stream me" }] }).length;
    expect(chunks[6]).toMatchObject({ choices: [], usage: { prompt_tokens: prompt, completion_tokens: 5, total_tokens: prompt + 5, prompt_tokens_details: { cached_tokens: 0 } } });
  });

  it("should omit the usage chunk without include_usage and put usage on every chunk with continuous_usage_stats", async () => {
    const plain = (await sse(await post("/v1/chat/completions", chatBody({ stream: true, max_tokens: 2 })))).slice(0, -1).map((d) => JSON.parse(d));
    expect(plain.every((c) => c.usage === undefined && c.choices.length === 1)).toBe(true);
    const cont = (await sse(await post("/v1/chat/completions", chatBody({ stream: true, max_tokens: 2, stream_options: { continuous_usage_stats: true } })))).slice(0, -1).map((d) => JSON.parse(d));
    expect(cont.map((c) => c.usage.completion_tokens)).toEqual([0, 1, 2]);
  });
});

describe("sim HTTP: completions", () => {
  it("should complete token-id prompts, non-streaming and streaming", async () => {
    const prompt = Array.from({ length: 40 }, (_, i) => 7000 + i);
    const whole = await (await post("/v1/completions", { prompt, max_tokens: 3 })).json();
    expect(whole).toMatchObject({ object: "text_completion", choices: [{ index: 0, text: FILLER_TEXT.slice(0, 12), finish_reason: "length" }], usage: { prompt_tokens: 40, completion_tokens: 3 } });
    expect(whole.id).toMatch(/^cmpl-/);
    const data = await sse(await post("/v1/completions", { prompt, max_tokens: 3, stream: true, stream_options: { include_usage: true } }));
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    expect(chunks.slice(0, 3).map((c) => c.choices[0].text).join("")).toBe(FILLER_TEXT.slice(0, 12));
    expect(chunks[2].choices[0].finish_reason).toBe("length");
    expect(chunks[3]).toMatchObject({ object: "text_completion", choices: [], usage: { prompt_tokens: 40, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 32 } } });
  });

  it("should tokenize text prompts like /tokenize and accept prompt_token_ids", async () => {
    const tok = await (await post("/tokenize", { prompt: "hello world, hello sim" })).json();
    expect(tok).toEqual({ count: 6, max_model_len: 4096, tokens: Array.from(simEncode("hello world, hello sim")) });
    const done = await (await post("/v1/completions", { prompt: "hello world, hello sim", max_tokens: 1 })).json();
    expect(done.usage.prompt_tokens).toBe(6);
    const viaIds = await (await post("/v1/chat/completions", { messages: [{ role: "user", content: "ignored" }], prompt_token_ids: [1, 2, 3], max_tokens: 1 })).json();
    expect(viaIds.usage.prompt_tokens).toBe(3);
  });
});

describe("sim HTTP: other endpoints", () => {
  it("should serve /health, /v1/models, /tokenize (chat), /detokenize and /metrics", async () => {
    const health = await fetch(sim.url + "/health");
    expect(health.status).toBe(200);
    expect(await health.text()).toBe("");
    const models = await (await fetch(sim.url + "/v1/models")).json();
    expect(models).toMatchObject({ object: "list", data: [{ id: MODEL, object: "model", root: MODEL, max_model_len: 4096 }] });
    const chat = await (await post("/tokenize", { messages: [{ role: "user", content: "hi" }], return_token_strs: true })).json();
    expect(chat.tokens).toEqual(Array.from(simChatTokens({ messages: [{ role: "user", content: "hi" }] })));
    expect(chat.token_strs.join("")).toBe("<|user|>\nhi\n<|assistant|>\n");
    expect(await (await post("/detokenize", { tokens: chat.tokens })).json()).toEqual({ prompt: "<|user|>\nhi\n<|assistant|>\n" });
    const metrics = await fetch(sim.url + "/metrics");
    expect(metrics.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await metrics.text();
    for (const name of ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:time_to_first_token_seconds_bucket"]) {
      expect(text).toContain(`${name}{`);
    }
    expect(text).toMatch(new RegExp(`vllm:num_requests_running\\{engine="0",model_name="${MODEL}"\\} 0`));
  });
});

describe("sim HTTP: errors", () => {
  const cases: [string, string | Record<string, unknown>, number, string][] = [
    ["malformed JSON", "{\"messages\": [", 400, "KVGATE_ERR_BAD_ARGUMENT"],
    ["a JSON array body", "[1,2]", 400, "KVGATE_ERR_BAD_ARGUMENT"],
    ["no messages", { model: MODEL }, 400, "KVGATE_ERR_BAD_ARGUMENT"],
    ["an unknown model", { model: "gpt-nope", messages: [{ role: "user", content: "x" }] }, 404, "KVGATE_ERR_UNKNOWN_MODEL"],
    ["max_tokens of 0", { messages: [{ role: "user", content: "x" }], max_tokens: 0 }, 400, "KVGATE_ERR_BAD_ARGUMENT"],
    ["a string max_tokens", { messages: [{ role: "user", content: "x" }], max_tokens: "5" }, 400, "KVGATE_ERR_BAD_ARGUMENT"],
    ["n = 2", { messages: [{ role: "user", content: "x" }], n: 2 }, 400, "KVGATE_ERR_BAD_ARGUMENT"],
    ["stream_options without stream", { messages: [{ role: "user", content: "x" }], stream_options: { include_usage: true } }, 400, "KVGATE_ERR_BAD_ARGUMENT"],
    ["more tokens than the context", { messages: [{ role: "user", content: "x" }], max_tokens: 5000 }, 400, "KVGATE_ERR_PROMPT_TOO_LONG"],
    ["a message without a role", { messages: [{ content: "x" }] }, 400, "KVGATE_ERR_BAD_ARGUMENT"],
  ];
  for (const [what, body, status, code] of cases) {
    it(`should answer ${what} with ${status} and an OpenAI error body`, async () => {
      const res = await post("/v1/chat/completions", body);
      expect(res.status).toBe(status);
      const json = await res.json();
      expect(json.error).toMatchObject({ code, type: status === 404 ? "not_found_error" : "invalid_request_error" });
      expect(typeof json.error.message).toBe("string");
    });
  }

  it("should answer unknown routes with 404 JSON and batch completions prompts with 400", async () => {
    const res = await fetch(sim.url + "/v1/nothing");
    expect(res.status).toBe(404);
    expect((await res.json()).error.type).toBe("not_found_error");
    const batch = await post("/v1/completions", { prompt: ["a", "b"] });
    expect(batch.status).toBe(400);
  });
});

describe("sim HTTP: client aborts", () => {
  it("should refuse a second live request with the same x-request-id", async () => {
    const slow = await startSimServer({ numGpuBlocks: 256, speedupRatio: 1 });
    try {
      const headers = { "content-type": "application/json", "x-request-id": "dup-1" };
      const body = JSON.stringify({ prompt: [1, 2, 3], max_tokens: 3000, stream: true });
      const ac = new AbortController();
      const first = await fetch(slow.url + "/v1/completions", { method: "POST", headers, body, signal: ac.signal });
      expect(first.status).toBe(200);
      const again = await fetch(slow.url + "/v1/completions", { method: "POST", headers, body });
      expect(again.status).toBe(400);
      expect((await again.json()).error.message).toContain("dup-1");
      ac.abort();
    } finally {
      await slow.close();
    }
  });

  it("should abort a streaming request when the client goes away, freeing its blocks", async () => {
    const slow = await startSimServer({ numGpuBlocks: 256, speedupRatio: 1 });
    try {
      const ac = new AbortController();
      const res = await fetch(slow.url + "/v1/completions", {
        method: "POST", headers: { "content-type": "application/json" }, signal: ac.signal,
        body: JSON.stringify({ prompt: Array.from({ length: 100 }, (_, i) => i), max_tokens: 3000, stream: true }),
      });
      const reader = res.body!.getReader();
      const first = await reader.read();
      expect(new TextDecoder().decode(first.value)).toContain("text_completion");
      expect(slow.engine.running).toBe(1);
      expect(slow.engine.cache.usedBlocks).toBeGreaterThan(0);
      ac.abort();
      for (let i = 0; i < 200 && slow.engine.running > 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(slow.engine.running).toBe(0);
      expect(slow.engine.cache.usedBlocks).toBe(0);
      expect(await slow.engine.metrics.registry.render()).toMatch(/vllm:request_success_total\{engine="0",finished_reason="abort",model_name="kvgate-sim"\} 1/);
    } finally {
      await slow.close();
    }
  });

  it("should abort a non-streaming request when the client goes away", async () => {
    const slow = await startSimServer({ numGpuBlocks: 256, speedupRatio: 1 });
    try {
      const ac = new AbortController();
      const pending = fetch(slow.url + "/v1/completions", {
        method: "POST", headers: { "content-type": "application/json" }, signal: ac.signal,
        body: JSON.stringify({ prompt: Array.from({ length: 100 }, (_, i) => i), max_tokens: 3000 }),
      }).catch((e: Error) => e);
      for (let i = 0; i < 200 && slow.engine.running === 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(slow.engine.running).toBe(1);
      ac.abort();
      expect(await pending).toBeInstanceOf(Error);
      for (let i = 0; i < 200 && slow.engine.running > 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(slow.engine.running).toBe(0);
      expect(slow.engine.cache.usedBlocks).toBe(0);
    } finally {
      await slow.close();
    }
  });
});
