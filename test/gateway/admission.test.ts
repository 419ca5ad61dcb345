/**
 * @module Admission through the HTTP surface: 429 with Retry-After when the router's queue turns a request away,
 * 503 when every worker is over a busy threshold, session stickiness from the configured header, and the session
 * table's bounds (--session-max-entries, --session-max-id-bytes).
 */
import { describe, expect, it } from "vitest";
import { fakeGateway, type SeenRequest } from "./fake-workers.ts";

const body = { model: "m", messages: [{ role: "user", content: "hold the line" }], max_tokens: 3 };
const hang = (r: SeenRequest) => new Promise<Response>((_, reject) => r.signal.addEventListener("abort", () => reject(r.signal.reason)));
const ok = () => Response.json({ choices: [{ message: { role: "assistant", content: "ok" } }] });

describe("admission", () => {
  it("should answer 429 with Retry-After when the queue is full", async () => {
    const { gw, fleet, call } = await fakeGateway(1, ["--queue-threshold", "0", "--queue-max-length", "0", "--retry-after-ms", "2500"], ",max_batched_tokens=1");
    fleet.scripts.set("w1", hang);
    const ac = new AbortController();
    const held = call("/v1/chat/completions", body, { signal: ac.signal });
    await new Promise((r) => setTimeout(r, 0));
    const res = await call("/v1/chat/completions", body);
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("3");
    expect((await res.json()).error.code).toBe("KVGATE_ERR_QUEUE_REJECTED");
    ac.abort();
    expect((await held).status).toBe(499);
    expect(gw.state.router.liveBookings).toBe(0);
  });

  it("should answer 503 when every worker is busy", async () => {
    const { fleet, call } = await fakeGateway(2, ["--busy-prefill-tokens", "1"]);
    for (const w of ["w1", "w2"]) fleet.scripts.set(w, hang);
    const acs = [new AbortController(), new AbortController()];
    const held = acs.map((ac) => call("/v1/chat/completions", body, { signal: ac.signal }));
    await new Promise((r) => setTimeout(r, 0));
    const res = await call("/v1/chat/completions", body);
    expect(res.status).toBe(503);
    expect((await res.json()).error.code).toBe("KVGATE_ERR_ALL_WORKERS_BUSY");
    for (const ac of acs) ac.abort();
    await Promise.all(held);
  });

  it("should keep a session on one worker", async () => {
    const { fleet, call } = await fakeGateway(3);
    for (const w of ["w1", "w2", "w3"]) fleet.scripts.set(w, ok);
    const workers = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const res = await call("/v1/chat/completions", { ...body, messages: [{ role: "user", content: `turn ${i}` }] }, { headers: { "x-session-id": "conversation-1" } });
      workers.add(res.headers.get("x-kvgate-worker")!);
    }
    expect(workers.size).toBe(1);
  });

  it("should bound the session table: 503 for a new session when it is full, 400 for an id over the byte limit", async () => {
    const { fleet, call } = await fakeGateway(2, ["--session-max-entries", "2", "--session-max-id-bytes", "8"]);
    for (const w of ["w1", "w2"]) fleet.scripts.set(w, ok);
    const turn = (id: string) => call("/v1/chat/completions", body, { headers: { "x-session-id": id } });
    for (const id of ["s1", "s2", "s1"]) expect((await turn(id)).status).toBe(200);
    const full = await turn("s3");
    expect(full.status).toBe(503);
    expect((await full.json()).error.code).toBe("KVGATE_ERR_SESSION_LIMIT");
    expect((await turn("s2")).status).toBe(200); // known sessions still route
    const long = await turn("ninechars");
    expect(long.status).toBe(400);
    expect((await long.json()).error.message).toContain("longer than 8 bytes");
  });
});
