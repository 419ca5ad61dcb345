/**
 * @module Non-streamed dispatch against scripted workers: retry on refused connections, retryable statuses and
 * broken bodies; pass-through of the worker's own 4xx; 502/504 when every attempt fails; pinned requests stay put;
 * header hygiene both ways and the body kvgate forwards.
 */
import { describe, expect, it } from "vitest";
import { chatChunk, data, fakeGateway, type SeenRequest } from "./fake-workers.ts";

const body = (extra: Record<string, unknown> = {}) => ({ model: "m", messages: [{ role: "user", content: "hello" }], max_tokens: 3, ...extra });
const ok = () => Response.json({ object: "chat.completion", choices: [{ message: { role: "assistant", content: "ok" } }], usage: { prompt_tokens: 10, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 5 } } });
const refused = (): never => {
  throw new TypeError("fetch failed", { cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }) });
};

/** Both workers run `scripts` in call order, whichever worker the router picks. */
function inOrder(fleet: { scripts: Map<string, (r: SeenRequest) => Response | Promise<Response>> }, scripts: ((r: SeenRequest) => Response | Promise<Response>)[]): void {
  let n = 0;
  for (const w of ["w1", "w2", "w3"]) fleet.scripts.set(w, (r) => scripts[Math.min(n++, scripts.length - 1)]!(r));
}

describe("retries before the first byte", () => {
  it("should retry a refused connection on another worker and answer from it", async () => {
    const { gw, fleet, call } = await fakeGateway(2);
    inOrder(fleet, [refused, ok]);
    const res = await call("/v1/chat/completions", body());
    expect(res.status).toBe(200);
    expect((await res.json()).choices[0].message.content).toBe("ok");
    const [a, b] = fleet.calls();
    expect(b!.worker).not.toBe(a!.worker);
    expect(res.headers.get("x-kvgate-worker")).toBe(b!.worker);
    expect(gw.state.metrics.retries.get({ reason: "connect" })).toBe(1);
    expect(gw.state.metrics.actualHit.count()).toBe(1);
    expect(gw.state.router.liveBookings).toBe(0);
  });

  it("should retry 503 answers and bodies that break, and answer 502 once every worker failed", async () => {
    const { fleet, call } = await fakeGateway(3, ["--retries", "2"]);
    const broken = () => new Response(new ReadableStream({ pull: (c) => c.error(new TypeError("terminated")) }), { headers: { "content-type": "application/json" } });
    inOrder(fleet, [() => Response.json({ error: { message: "overloaded" } }, { status: 503 }), broken, refused]);
    const res = await call("/v1/chat/completions", body());
    expect(res.status).toBe(502);
    const err = (await res.json()).error;
    expect(err).toMatchObject({ code: "KVGATE_ERR_UPSTREAM", type: "server_error" });
    expect(new Set(fleet.calls().map((c) => c.worker)).size).toBe(3);
  });

  it("should answer 504 when no worker sends headers in time", async () => {
    const { fleet, call } = await fakeGateway(1, ["--upstream-timeout-ms", "20", "--retries", "0"]);
    fleet.scripts.set("w1", (r) => new Promise<Response>((_, reject) => r.signal.addEventListener("abort", () => reject(r.signal.reason))));
    const res = await call("/v1/chat/completions", body());
    expect(res.status).toBe(504);
    expect((await res.json()).error.code).toBe("KVGATE_ERR_UPSTREAM_TIMEOUT");
  });

  it("should pass a worker's 4xx answer through unchanged, without retrying", async () => {
    const { fleet, call } = await fakeGateway(2);
    const answer = JSON.stringify({ error: { message: "max_tokens is too large", type: "BadRequestError", code: 400 } });
    inOrder(fleet, [() => new Response(answer, { status: 400, headers: { "content-type": "application/json" } })]);
    const res = await call("/v1/chat/completions", body());
    expect(res.status).toBe(400);
    expect(await res.text()).toBe(answer);
    expect(fleet.calls()).toHaveLength(1);
  });

  it("should not move a request pinned to a worker", async () => {
    const { fleet, call } = await fakeGateway(2);
    inOrder(fleet, [refused, ok]);
    const res = await call("/v1/chat/completions", body({ kvgate: { worker_id: "w2" } }));
    expect(res.status).toBe(502);
    expect(fleet.calls().map((c) => c.worker)).toEqual(["w2"]);
  });
});

describe("what kvgate sends and answers", () => {
  it("should strip hop-by-hop headers and accept-encoding, keep the rest, and drop the routing field", async () => {
    const { fleet, call } = await fakeGateway(1);
    fleet.scripts.set("w1", () => new Response(JSON.stringify({ choices: [] }), {
      headers: { "content-type": "application/json", connection: "keep-alive, x-hop", "keep-alive": "timeout=5", "x-hop": "1", "x-engine": "vllm" },
    }));
    const res = await call("/v1/chat/completions", body({ kvgate: { temperature: 0.5 }, nvext: { agent_hints: { priority: 1 } } }), {
      headers: {
        "content-type": "application/json", authorization: "Bearer user-key", connection: "x-secret", "x-secret": "1", te: "trailers",
        "accept-encoding": "gzip, br", "x-custom": "kept", "proxy-authorization": "Basic abc",
      },
    });
    const sent = fleet.calls()[0]!;
    expect(sent.headers.get("authorization")).toBe("Bearer user-key");
    expect(sent.headers.get("x-custom")).toBe("kept");
    for (const h of ["connection", "x-secret", "te", "accept-encoding", "proxy-authorization", "content-length", "host"]) expect(sent.headers.has(h)).toBe(false);
    expect(sent.headers.get("x-request-id")).toMatch(/^kvg-/);
    expect(sent.body.kvgate).toBeUndefined();
    expect(sent.body.nvext).toEqual({ agent_hints: { priority: 1 } });
    for (const h of ["connection", "keep-alive", "x-hop"]) expect(res.headers.has(h)).toBe(false);
    expect(res.headers.get("x-engine")).toBe("vllm");
    expect(res.headers.get("x-kvgate-worker")).toBe("w1");
  });

  it("should forward the client's body text unchanged, and splice the usage request into a stream's", async () => {
    const { fleet, call } = await fakeGateway(1);
    fleet.scripts.set("w1", ok);
    // A seed beyond 2^53 would not survive JSON.parse + JSON.stringify; the text itself is what the worker gets.
    const plain = ` {"model":"m", "seed": 12345678901234567890, "messages":[{"role":"user","content":"hi"}]}`;
    await call("/v1/chat/completions", plain);
    expect(fleet.calls()[0]!.text).toBe(plain);
    fleet.scripts.set("w1", () => new Response(data(chatChunk("c", "x", "stop")) + data("[DONE]"), { headers: { "content-type": "text/event-stream" } }));
    const streamed = `{"model":"m","stream":true,"seed":12345678901234567890,"messages":[{"role":"user","content":"hi"}]}`;
    await (await call("/v1/chat/completions", streamed)).text();
    const sent = fleet.calls()[1]!;
    expect(sent.text).toBe(`{"stream_options":{"include_usage":true},${streamed.slice(1)}`);
    expect(sent.body.stream_options).toEqual({ include_usage: true });
  });

  it("should re-serialize the body when kvgate must change a field the client sent", async () => {
    const { fleet, call } = await fakeGateway(1);
    fleet.scripts.set("w1", () => new Response(data("[DONE]"), { headers: { "content-type": "text/event-stream" } }));
    const withOptions = { model: "m", stream: true, stream_options: { continuous_usage_stats: false }, messages: [{ role: "user", content: "hi" }] };
    await (await call("/v1/chat/completions", withOptions)).text();
    expect(fleet.calls()[0]!.body.stream_options).toEqual({ continuous_usage_stats: false, include_usage: true });
    expect(fleet.calls()[0]!.text.match(/stream_options/g)).toHaveLength(1);
    await (await call("/v1/chat/completions", { ...withOptions, stream_options: { include_usage: true }, kvgate: { priority: 1 } })).text();
    expect(fleet.calls()[1]!.body).not.toHaveProperty("kvgate");
    expect(fleet.calls()[1]!.body.stream_options).toEqual({ include_usage: true });
  });

  it("should keep the client's x-request-id", async () => {
    const { fleet, call } = await fakeGateway(1);
    fleet.scripts.set("w1", ok);
    await call("/v1/chat/completions", body(), { headers: { "x-request-id": "client-42" } });
    expect(fleet.calls()[0]!.headers.get("x-request-id")).toBe("client-42");
  });

  it("should answer query_only requests with the decision and send nothing", async () => {
    const { fleet, call } = await fakeGateway(2);
    const res = await call("/v1/chat/completions", body({ kvgate: { query_only: true } }));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ object: "kvgate.route", prompt_blocks: expect.any(Number) });
    expect(fleet.calls()).toHaveLength(0);
  });
});
