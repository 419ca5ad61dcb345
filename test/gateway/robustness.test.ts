/**
 * @module Nothing a client sends crashes kvgate or corrupts router state: seeded random bodies (wrong types, odd
 * nesting, huge numbers, bad routing fields) get a typed answer — never a 500 — and leave no booking behind.
 */
import { describe, expect, it } from "vitest";
import { createPrng } from "../../src/routing/index.ts";
import { chatChunk, data, fakeGateway, sseResponse } from "./fake-workers.ts";

function randomValue(r: () => number, depth = 0): unknown {
  const k = Math.floor(r() * (depth > 2 ? 6 : 9));
  switch (k) {
    case 0: return null;
    case 1: return r() < 0.5;
    case 2: return [0, -1, 1.5, 1e308, Number.MAX_SAFE_INTEGER, 3][Math.floor(r() * 6)];
    case 3: return ["", "user", "assistant", "m", "x".repeat(50), "\u0000\ud800"][Math.floor(r() * 6)];
    case 4: return undefined;
    case 5: return "text";
    case 6: return Array.from({ length: Math.floor(r() * 3) }, () => randomValue(r, depth + 1));
    default: return Object.fromEntries(Array.from({ length: Math.floor(r() * 4) }, (_, i) => [["role", "content", "type", "text", "name", "tool_calls", "worker_id", "temperature"][Math.floor(r() * 8)]! + (i > 2 ? i : ""), randomValue(r, depth + 1)]));
  }
}

function randomBody(r: () => number): unknown {
  const body: Record<string, unknown> = {};
  const fields = ["model", "messages", "prompt", "stream", "max_tokens", "stream_options", "kvgate", "n", "tools", "continue_final_message", "add_generation_prompt"];
  for (const f of fields) if (r() < 0.5) body[f] = randomValue(r);
  if (r() < 0.5) body.model = "m";
  if (r() < 0.4) body.messages = [{ role: "user", content: randomValue(r) }, ...(r() < 0.3 ? [randomValue(r)] : [])];
  return r() < 0.05 ? randomValue(r) : body;
}

describe("robustness", () => {
  it("should answer 300 random bodies without a 500 and leave the router clean", async () => {
    const { gw, fleet, call } = await fakeGateway(2);
    for (const w of ["w1", "w2"]) fleet.scripts.set(w, (req) => req.body.stream === true
      ? sseResponse({ parts: [data(chatChunk("a", "ok", "stop")), data("[DONE]")] }, req.signal)
      : Response.json({ choices: [{ message: { role: "assistant", content: "ok" } }] }));
    const r = createPrng(7);
    const statuses = new Map<number, number>();
    for (let i = 0; i < 300; i++) {
      const path = r() < 0.5 ? "/v1/chat/completions" : r() < 0.5 ? "/v1/completions" : "/v1/route";
      const res = await call(path, JSON.stringify(randomBody(r)) ?? "null", { headers: { "content-type": "application/json" } }).catch((e) => e as Error);
      if (res instanceof Error) throw res;
      await res.arrayBuffer();
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      expect(res.status, `request ${i}`).not.toBe(500);
    }
    expect(statuses.get(200)).toBeGreaterThan(0);
    expect(statuses.get(400)).toBeGreaterThan(0);
    expect(gw.state.router.liveBookings).toBe(0);
    expect(gw.state.router.queueDepth).toBe(0);
    expect((await gw.fetch(new Request("http://kvgate.test/health"))).status).toBe(200);
  });

  it("limits bodies by declared length without reading them, and bodies of unknown length while reading", async () => {
    const { gw, fleet, call } = await fakeGateway(1, ["--max-body-bytes", "2048"]);
    fleet.scripts.set("w1", () => Response.json({ choices: [{ message: { role: "assistant", content: "ok" } }] }));
    const small = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });
    const big = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(4096) }] });
    const streamed = (text: string, pieces: number): ReadableStream<Uint8Array> => {
      const bytes = new TextEncoder().encode(text);
      const step = Math.ceil(bytes.length / pieces);
      let at = 0;
      return new ReadableStream({
        pull(ctl) {
          if (at >= bytes.length) return ctl.close();
          ctl.enqueue(bytes.slice(at, (at += step)));
        },
      });
    };
    const send = (body: BodyInit, headers: Record<string, string> = {}) =>
      call("/v1/chat/completions", undefined, { body, headers: { "content-type": "application/json", ...headers }, duplex: "half" } as RequestInit);
    const code = async (res: Response) => [res.status, ((await res.json()) as { error: { code: string } }).error?.code];
    expect((await send(streamed(small, 3))).status).toBe(200);
    expect(await code(await send(streamed(big, 5)))).toEqual([413, "KVGATE_ERR_BODY_TOO_LARGE"]);
    // A declared length over the limit is refused before a byte is read; a malformed one is a bad request.
    expect(await code(await send(streamed(small, 1), { "content-length": "4096" }))).toEqual([413, "KVGATE_ERR_BODY_TOO_LARGE"]);
    expect(await code(await send(small, { "content-length": "12x" }))).toEqual([400, "KVGATE_ERR_BAD_ARGUMENT"]);
    expect(gw.state.router.liveBookings).toBe(0);
  });
});
