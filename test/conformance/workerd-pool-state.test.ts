/**
 * @module The pool object is the one routing state of all isolates: two Worker services (two isolates) on one
 * workerd share cache views, KV events and bookings through PoolState, and do not without the binding.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { realClock } from "../../src/sim/sim-clock.ts";
import { encodeKvEventBatch } from "../../src/sim/kv-event-codec.ts";
import { simChatTokens } from "../../src/sim/sim-tokenizer.ts";
import { admin, longText, metric, MODEL, OTHER_MODEL, post, simFor, TOKEN } from "./fleet.ts";
import { until } from "./processes.ts";
import { startWorkerd, type RunningGateway } from "./runtimes.ts";

/** Long enough for the tests' streams (a few seconds under load), short enough to wait out. */
const PLAN_TTL_MS = 20_000;

for (const pool of [true, false]) {
  describe(`two isolates ${pool ? "with" : "without"} the pool object`, () => {
    let gw: RunningGateway & { urls: string[] };
    let a: SimServer, b: SimServer, slow: SimServer, quiet: SimServer;
    let e0: string, e1: string;
    // Q's view is the posted one: requests that are served leave it out.
    const chat = (content: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 2, kvgate: { exclude_workers: ["Q"] }, ...extra });
    const route = async (edge: string, body: unknown): Promise<{ worker: string; overlap_blocks: number }> => (await post(`${edge}/v1/route`, body)).json();
    const ranks = async (edge: string, id: string): Promise<number> =>
      ((await (await fetch(`${edge}/admin/workers`, { headers: admin })).json()).data as { id: string; ranks: { active_requests: number }[] }[])
        .find((w) => w.id === id)!.ranks[0]!.active_requests;

    beforeAll(async () => {
      gw = await startWorkerd({ KVGATE_ADMIN_TOKEN: TOKEN, KVGATE_LOG: "warn", KVGATE_TICK_MS: "50", KVGATE_INDEX_CAPACITY: "65536",
        // A plan whose cancel report is lost (workerd can drop a gone client's pending work) is freed by expiry.
        KVGATE_PLAN_TTL_MS: String(PLAN_TTL_MS) }, { pool, edges: 2 });
      [e0, e1] = gw.urls as [string, string];
      // The engines' KV events reach the first isolate only, as a bridge posts to one address.
      // Q publishes nothing itself: the test posts its KV events (never sent a request, so its view stays as posted).
      [a, b, slow, quiet] = await Promise.all([simFor(e0, "A"), simFor(e0, "B"), simFor(e0, "S", OTHER_MODEL, 1),
        startSimServer({ clock: realClock(), model: MODEL, workerId: "Q", speedupRatio: 50, numGpuBlocks: 4096, maxModelLen: 8192 })]);
      // With the pool object one fleet serves both isolates; without it each isolate needs its own.
      for (const edge of pool ? [e0] : [e0, e1]) {
        for (const [w, id] of [[a, "A"], [b, "B"], [slow, "S"], [quiet, "Q"]] as const) {
          const res = await fetch(`${edge}/admin/workers`, { method: "POST", headers: admin, body: JSON.stringify({ url: w.url, id, kv_events: true }) });
          expect(res.status).toBe(201);
        }
      }
    }, 120_000);

    afterAll(async () => {
      await Promise.all([a?.close(), b?.close(), slow?.close(), quiet?.close(), gw?.stop()]);
    }, 30_000);

    it("should say where the routing state is", async () => {
      const res = await post(`${e1}/v1/chat/completions`, chat("where"));
      expect(res.status).toBe(200);
      await res.json();
      expect(res.headers.get("x-kvgate-state")).toBe(pool ? "durable-object" : null);
    });

    it("should let both isolates see a KV event batch posted to one", async () => {
      const body = { ...chat(longText("posted events")), kvgate: {} };
      const tokens = Array.from(simChatTokens(body));
      const blocks = Math.floor(tokens.length / 16);
      const batch = encodeKvEventBatch({ ts: 0, data_parallel_rank: 0, events: [{
        type: "BlockStored", block_hashes: Array.from({ length: blocks }, (_, i) => 700_000n + BigInt(i)), parent_block_hash: null,
        token_ids: tokens.slice(0, blocks * 16), block_size: 16, lora_id: null, medium: "GPU", lora_name: null,
      }] });
      const ingest = await fetch(`${e0}/admin/kv-events`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/msgpack", "x-kvgate-worker": "Q" }, body: batch });
      expect(ingest.status).toBe(200);
      const here = await route(e0, body);
      expect(here).toMatchObject({ worker: "Q", overlap_blocks: blocks });
      const there = await route(e1, body);
      expect(there.overlap_blocks).toBe(pool ? blocks : 0);
      if (pool) expect(there.worker).toBe("Q");
    });

    it("should find a prompt served through one isolate cached when it comes through the other", async () => {
      const body = chat(longText("served once"));
      const first = await post(`${e0}/v1/chat/completions`, body);
      expect(first.status).toBe(200);
      const w = first.headers.get("x-kvgate-worker")!;
      await first.json();
      // The engine's KV events for it (posted to the first isolate) have been applied there.
      await until(async () => (await route(e0, body)).overlap_blocks > 0, "the engine's KV events");
      const second = await post(`${e1}/v1/chat/completions`, body);
      expect(second.status).toBe(200);
      const overlap = Number(second.headers.get("x-kvgate-overlap-blocks")!.split("/")[0]);
      const usage = (await second.json()).usage;
      if (pool) {
        expect(second.headers.get("x-kvgate-worker")).toBe(w);
        expect(overlap).toBeGreaterThan(0);
        expect(usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
      } else {
        expect(overlap).toBe(0);
      }
      const m = await (await fetch(`${e0}/metrics`)).text();
      expect((metric(m, "kvgate_reported_cached_tokens_total") ?? 0) > 0).toBe(pool);
    });

    it("should book concurrent requests from both isolates in one place and free them all", async () => {
      const streams = await Promise.all(Array.from({ length: 8 }, async (_, i) => {
        const res = await post(`${i % 2 === 0 ? e0 : e1}/v1/chat/completions`, { ...chat(`concurrent ${i}`, { stream: true, max_tokens: 2000 }), model: OTHER_MODEL });
        expect(res.headers.get("x-kvgate-worker")).toBe("S");
        const reader = res.body!.getReader();
        const text = new TextDecoder();
        let seen = "";
        while (!seen.includes('"content":"')) seen += text.decode((await reader.read()).value);
        return reader;
      }));
      try {
        // Each isolate books its own four without the object; with it, both see all eight.
        expect(await ranks(e1, "S")).toBe(pool ? 8 : 4);
        expect(await ranks(e0, "S")).toBe(pool ? 8 : 4);
      } finally {
        await Promise.all(streams.map((r) => r.cancel()));
      }
      // By the cancel reports, or at the latest by the plans' expiry (pool object) or the streams' lease (each isolate
      // on its own): workerd can end a request whose client left without cancelling its body or firing its signal.
      await until(async () => (await ranks(e0, "S")) === 0 && (await ranks(e1, "S")) === 0, "the bookings to be freed", PLAN_TTL_MS + 30_000);
    }, PLAN_TTL_MS + 60_000);
  });
}
