/**
 * @module A stream through the Workers pool that outlives its plan's TTL keeps its booking: the Worker sends
 * keepalive reports while it relays, and the booking ends only when the stream does.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimServer } from "../../src/adapter/node/sim-server.ts";
import { admin, MODEL, post, simFor, TOKEN } from "./fleet.ts";
import { until } from "./processes.ts";
import { startWorkerd, type RunningGateway } from "./runtimes.ts";

const PLAN_TTL_MS = 1_500;

describe("a long stream through the pool object", () => {
  let gw: RunningGateway & { urls: string[] };
  let sim: SimServer;
  const active = async (): Promise<number> =>
    ((await (await fetch(`${gw.url}/admin/workers`, { headers: admin })).json()).data as { id: string; ranks: { active_requests: number }[] }[])
      .find((w) => w.id === "L")!.ranks[0]!.active_requests;

  beforeAll(async () => {
    gw = await startWorkerd({ KVGATE_ADMIN_TOKEN: TOKEN, KVGATE_LOG: "warn", KVGATE_TICK_MS: "50", KVGATE_PLAN_TTL_MS: String(PLAN_TTL_MS) }, { pool: true });
    // Real-time speed (about 6 ms a token): 1,000 tokens outlast several TTLs.
    sim = await simFor(gw.url, "L", MODEL, 1);
    const res = await fetch(`${gw.url}/admin/workers`, { method: "POST", headers: admin, body: JSON.stringify({ url: sim.url, id: "L", kv_events: true }) });
    expect(res.status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([sim?.close(), gw?.stop()]);
  }, 30_000);

  it("keeps its booking past the plan TTL while it streams, and frees it when the stream ends", async () => {
    const res = await post(`${gw.url}/v1/chat/completions`, { model: MODEL, stream: true, max_tokens: 1_000, messages: [{ role: "user", content: "a long one" }] });
    expect(res.headers.get("x-kvgate-state")).toBe("durable-object");
    const reader = res.body!.getReader();
    let text = "";
    const dec = new TextDecoder();
    while (!text.includes('"content":"')) text += dec.decode((await reader.read()).value, { stream: true });
    // Read on for more than twice the TTL: without keepalives the plan (and so the booking) would be gone by now.
    const until2Ttl = Date.now() + 2 * PLAN_TTL_MS + 500;
    let done = false;
    while (Date.now() < until2Ttl && !done) {
      const r = await reader.read();
      done = r.done;
      if (r.value) text += dec.decode(r.value, { stream: true });
    }
    expect(done, "the stream must still run past two TTLs for this test to mean anything").toBe(false);
    expect(await active()).toBe(1);
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += dec.decode(r.value, { stream: true });
    expect(text).toContain("data: [DONE]");
    await until(async () => (await active()) === 0, "the booking to be freed by the complete report");
  }, 60_000);
});
