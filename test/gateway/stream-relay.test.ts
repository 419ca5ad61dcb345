/**
 * @module Streaming through kvgate against scripted workers: byte-exact pass-through, the usage chunk kvgate asks
 * for, retry before the first token, migration after it (chat and completions, with the continuation request
 * checked), the cases that cannot migrate, and a client that goes away.
 */
import { describe, expect, it } from "vitest";
import { chatChunk, data, fakeGateway, sseResponse, textChunk, type SeenRequest } from "./fake-workers.ts";
import { sourceStream, takeDirectSource } from "../../src/gateway/direct-source.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

async function bytes(res: Response): Promise<Uint8Array> {
  return new Uint8Array(await res.arrayBuffer());
}

function events(text: string): string[] {
  return text.split("\n\n").filter(Boolean).map((e) => e.replace(/^data: /, ""));
}

function concat(parts: (string | Uint8Array)[]): Uint8Array {
  const bufs = parts.map((p) => (typeof p === "string" ? encoder.encode(p) : p));
  const out = new Uint8Array(bufs.reduce((n, b) => n + b.length, 0));
  let at = 0;
  for (const b of bufs) {
    out.set(b, at);
    at += b.length;
  }
  return out;
}

const chatBody = (extra: Record<string, unknown> = {}) => ({ model: "m", messages: [{ role: "user", content: "hi" }], stream: true, max_tokens: 10, ...extra });

describe("SSE pass-through", () => {
  it("should forward the worker's bytes unchanged, however the worker splits them", async () => {
    const { fleet, call } = await fakeGateway(1, ["--no-stream-usage"]);
    const euro = encoder.encode(data(chatChunk("c1", "5 €")));
    const cut = euro.indexOf(0xe2) + 1; // inside the three bytes of "€"
    const parts = [
      data(chatChunk("c1", undefined, null, "assistant")).slice(0, 17), data(chatChunk("c1", undefined, null, "assistant")).slice(17),
      ": keep-alive\n\n",
      `data: ${JSON.stringify(chatChunk("c1", "Hi"))}\r\n\r\n`,
      euro.subarray(0, cut), euro.subarray(cut),
      data(chatChunk("c1", "!", "stop")) + data("[DONE]"),
    ];
    fleet.scripts.set("w1", (r) => sseResponse({ parts }, r.signal));
    const res = await call("/v1/chat/completions", chatBody());
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(await bytes(res)).toEqual(concat(parts));
    expect(fleet.calls()[0]!.body.stream_options).toBeUndefined();
  });

  it("should ask for usage and drop the usage chunk the client did not ask for", async () => {
    const { gw, fleet, call } = await fakeGateway(1);
    const usage = { id: "c1", object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 20, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 16 } } };
    const parts = [data(chatChunk("c1", "A", "length")), data(usage), data("[DONE]")];
    fleet.scripts.set("w1", (r) => sseResponse({ parts }, r.signal));
    const res = await call("/v1/chat/completions", chatBody({ kvgate: { overlap_weight: 2 } }));
    expect(decoder.decode(await bytes(res))).toBe(parts[0]! + parts[2]!);
    const sent = fleet.calls()[0]!.body;
    expect(sent.stream_options).toEqual({ include_usage: true });
    expect(sent.kvgate).toBeUndefined();
    expect(gw.state.metrics.cachedTokens.get()).toBe(16);
    expect(gw.state.router.liveBookings).toBe(0);
  });
});

describe("failures mid-stream", () => {
  it("should migrate a chat after an error event: continue from the partial assistant message, one stream for the client", async () => {
    const { gw, fleet, call } = await fakeGateway(2);
    let n = 0;
    const scripts = [
      (r: SeenRequest) => sseResponse({ parts: [data(chatChunk("first", undefined, null, "assistant")), data(chatChunk("first", "Hel")), data(chatChunk("first", "lo")), data({ error: { message: "engine died", code: 500 } })] }, r.signal),
      (r: SeenRequest) => sseResponse({ parts: [data(chatChunk("second", undefined, null, "assistant")), data(chatChunk("second", " world", "length")), data("[DONE]")] }, r.signal),
    ];
    for (const w of ["w1", "w2"]) fleet.scripts.set(w, (r) => scripts[n++]!(r));
    const text = decoder.decode(await bytes(await call("/v1/chat/completions", chatBody({ messages: [{ role: "system", content: "s" }, { role: "user", content: "hi" }] }))));
    const evs = events(text);
    expect(evs[evs.length - 1]).toBe("[DONE]");
    const chunks = evs.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks.map((c) => c.id)).toEqual(["first", "first", "first", "first"]);
    expect(chunks.map((c) => c.choices[0].delta.content)).toEqual(["", "Hel", "lo", " world"]);
    const [a, b] = fleet.calls();
    expect(b!.worker).not.toBe(a!.worker);
    expect(b!.body.messages).toEqual([{ role: "system", content: "s" }, { role: "user", content: "hi" }, { role: "assistant", content: "Hello" }]);
    expect(b!.body).toMatchObject({ continue_final_message: true, add_generation_prompt: false, max_tokens: 8 });
    expect(gw.state.metrics.migrations.get({ endpoint: "chat" })).toBe(1);
    expect(gw.state.router.liveBookings).toBe(0);
  });

  it("should migrate a completion after a reset connection: prompt + generated text, usage shifted back", async () => {
    const { fleet, call } = await fakeGateway(2);
    let n = 0;
    const usage = (p: number, c: number) => ({ id: "x", object: "text_completion", choices: [], usage: { prompt_tokens: p, completion_tokens: c, total_tokens: p + c } });
    const scripts = [
      (r: SeenRequest) => sseResponse({ parts: [data(textChunk("one", "Once")), data(textChunk("one", " upon"))], end: "error" }, r.signal),
      (r: SeenRequest) => sseResponse({ parts: [data(textChunk("two", " a time", "length")), data(usage(12, 1)), data("[DONE]")] }, r.signal),
    ];
    for (const w of ["w1", "w2"]) fleet.scripts.set(w, (r) => scripts[n++]!(r));
    const res = await call("/v1/completions", { model: "m", prompt: "Tell me:", max_tokens: 3, stream: true, stream_options: { include_usage: true } });
    const chunks = events(decoder.decode(await bytes(res))).slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks.map((c) => c.choices[0]?.text).filter(Boolean).join("")).toBe("Once upon a time");
    expect(chunks.every((c) => c.id === "one")).toBe(true);
    expect(chunks[chunks.length - 1].usage).toEqual({ prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 });
    expect(fleet.calls()[1]!.body).toMatchObject({ prompt: "Tell me:Once upon", max_tokens: 1 });
  });

  it("should retry a stream that broke before its first token on another worker, with the same body", async () => {
    const { gw, fleet, call } = await fakeGateway(2);
    let n = 0;
    const scripts = [
      (r: SeenRequest) => sseResponse({ parts: [data(chatChunk("a", undefined, null, "assistant"))], end: "close" }, r.signal),
      (r: SeenRequest) => sseResponse({ parts: [data(chatChunk("b", undefined, null, "assistant")), data(chatChunk("b", "ok", "stop")), data("[DONE]")] }, r.signal),
    ];
    for (const w of ["w1", "w2"]) fleet.scripts.set(w, (r) => scripts[n++]!(r));
    const chunks = events(decoder.decode(await bytes(await call("/v1/chat/completions", chatBody())))).slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks.map((c) => [c.id, c.choices[0].delta.role, c.choices[0].delta.content])).toEqual([["a", "assistant", ""], ["a", undefined, "ok"]]);
    const [a, b] = fleet.calls();
    expect(b!.body).toEqual(a!.body);
    expect(gw.state.metrics.retries.get({ reason: "truncated" })).toBe(1);
    expect(gw.state.metrics.migrations.get({ endpoint: "chat" })).toBe(0);
  });

  it("should end a stream whose output finished but whose [DONE] was lost, without another attempt", async () => {
    const { fleet, call } = await fakeGateway(2);
    for (const w of ["w1", "w2"]) fleet.scripts.set(w, (r) => sseResponse({ parts: [data(chatChunk("a", "all", "stop"))], end: "error" }, r.signal));
    const evs = events(decoder.decode(await bytes(await call("/v1/chat/completions", chatBody()))));
    expect(evs).toEqual([JSON.stringify(chatChunk("a", "all", "stop")), "[DONE]"]);
    expect(fleet.calls()).toHaveLength(1);
  });

  it("should migrate after the worker goes silent for the idle timeout", async () => {
    const { fleet, call } = await fakeGateway(2, ["--upstream-idle-timeout-ms", "30"]);
    let n = 0;
    const scripts = [
      (r: SeenRequest) => sseResponse({ parts: [data(chatChunk("a", "x"))], end: "hang" }, r.signal),
      (r: SeenRequest) => sseResponse({ parts: [data(chatChunk("b", "y", "stop")), data("[DONE]")] }, r.signal),
    ];
    for (const w of ["w1", "w2"]) fleet.scripts.set(w, (r) => scripts[n++]!(r));
    const chunks = events(decoder.decode(await bytes(await call("/v1/chat/completions", chatBody())))).slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks.map((c) => c.choices[0].delta.content).join("")).toBe("xy");
    expect(fleet.calls()[0]!.signal.aborted).toBe(true);
  });

  it("should end with an error event when the request cannot be continued (n > 1) or the budget is spent", async () => {
    for (const [argv, body, why] of [[[], { n: 2 }, "n > 1"], [["--migration-limit", "0"], {}, ""]] as const) {
      const { fleet, call } = await fakeGateway(2, [...argv]);
      for (const w of ["w1", "w2"]) fleet.scripts.set(w, (r) => sseResponse({ parts: [data(chatChunk("a", "x"))], end: "error" }, r.signal));
      const evs = events(decoder.decode(await bytes(await call("/v1/chat/completions", chatBody(body)))));
      expect(evs).toHaveLength(3);
      expect(evs[2]).toBe("[DONE]");
      const err = JSON.parse(evs[1]!).error;
      expect(err.code).toBe("KVGATE_ERR_UPSTREAM");
      expect(err.message).toContain(why);
      expect(fleet.calls()).toHaveLength(1);
    }
  });
});

describe("a client that goes away", () => {
  it("should abort the worker's request and free the booking", async () => {
    const { gw, fleet, call } = await fakeGateway(1);
    fleet.scripts.set("w1", (r) => sseResponse({ parts: [data(chatChunk("a", "x"))], end: "hang" }, r.signal));
    const res = await call("/v1/chat/completions", chatBody());
    const reader = res.body!.getReader();
    expect(decoder.decode((await reader.read()).value)).toContain('"x"');
    expect(gw.state.router.liveBookings).toBe(1);
    await reader.cancel();
    expect(fleet.calls()[0]!.signal.aborted).toBe(true);
    expect(gw.state.router.liveBookings).toBe(0);
    expect(gw.state.metrics.cancellations.get()).toBe(1);
  });

  it("should abort a non-streamed request when the client's signal fires", async () => {
    const { gw, fleet, call } = await fakeGateway(1);
    let upstream!: AbortSignal;
    fleet.scripts.set("w1", (r) => {
      upstream = r.signal;
      return new Promise<Response>((_, reject) => r.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
    });
    const ac = new AbortController();
    const pending = call("/v1/chat/completions", { ...chatBody(), stream: false }, { signal: ac.signal });
    await new Promise((r) => setTimeout(r, 0));
    ac.abort();
    const res = await pending;
    expect(res.status).toBe(499);
    expect(upstream.aborted).toBe(true);
    expect(gw.state.router.liveBookings).toBe(0);
  });
});

describe("answers for an adapter that takes direct sources (GatewayHost.takesDirectSources)", () => {
  it("should build no body stream and give the worker's bytes through the direct source", async () => {
    const { fleet, call } = await fakeGateway(1, ["--no-stream-usage"], "", { takesDirectSources: true });
    const parts = [data(chatChunk("c1", undefined, null, "assistant")), data(chatChunk("c1", "Hi")), data(chatChunk("c1", "!", "stop")) + data("[DONE]")];
    fleet.scripts.set("w1", (r) => sseResponse({ parts }, r.signal));
    const res = await call("/v1/chat/completions", chatBody());
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(res.body).toBeNull();
    const source = takeDirectSource(res);
    expect(source).toBeDefined();
    expect(takeDirectSource(res)).toBeUndefined();
    expect(await bytes(new Response(sourceStream(source!)))).toEqual(concat(parts));
  });

  it("should keep a body stream for every other host", async () => {
    const { fleet, call } = await fakeGateway(1, ["--no-stream-usage"]);
    const parts = [data(chatChunk("c1", "Hi", "stop")) + data("[DONE]")];
    fleet.scripts.set("w1", (r) => sseResponse({ parts }, r.signal));
    const res = await call("/v1/chat/completions", chatBody());
    expect(res.body).not.toBeNull();
    expect(await bytes(res)).toEqual(concat(parts));
  });
});
