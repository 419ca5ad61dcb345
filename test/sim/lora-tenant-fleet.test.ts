/**
 * @module Adapters and tenants end to end through the built-in simulated fleet: engines serving 8 LoRA adapters
 * salt their cache and KV events by adapter and cache_salt as vLLM does, and a deterministic mix of 8 adapters and 4
 * tenants must see kvgate's predicted hit rate equal the engines' reported one (within 5 points), overall and per adapter.
 */
import { afterAll, describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway } from "../../src/gateway/gateway.ts";
import { startDefaultFleet, SIM_MODEL, type DefaultFleet } from "../../src/sim/default-fleet.ts";
import { startSimServer } from "../../src/adapter/node/sim-server.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";

const ADAPTERS = Array.from({ length: 8 }, (_, i) => `lora-${i}`);
const TENANTS = Array.from({ length: 4 }, (_, i) => `tenant-${i}`);
const DOCS = ["Quarterly report of the northern region, with every figure that matters. ", "Runbook for the storage cluster, step by step. "]
  .map((s) => s.repeat(14));
const REQUESTS = 192;

let fleet: DefaultFleet | undefined;
afterAll(async () => {
  await fleet?.close();
});

interface Tally {
  predicted: number;
  reported: number;
  prompt: number;
}

describe("adapters and tenants through the simulated fleet", () => {
  it("should predict the engines' reported hit rate within 5% on a mix of 8 adapters and 4 tenants", async () => {
    const loaded = await loadGatewayConfig({ argv: ["--log", "off", "--sim-lora-adapters", ADAPTERS.join(",")], env: {} });
    if (loaded.kind !== "config") throw new Error("expected a config");
    const gw = await createGateway(loaded.config, { log: () => {} });
    fleet = await startDefaultFleet(gw, startSimServer, 4, 1024, loaded.config.blockSize);
    const models = await (await gw.fetch(new Request("http://kvgate.test/v1/models"))).json();
    expect(models.data.filter((m: { parent: string | null }) => m.parent === SIM_MODEL)).toHaveLength(8);
    const bs = loaded.config.blockSize;
    const rand = seededRandom(16);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand.next() * xs.length)]!;
    const byAdapter = new Map<string, Tally>();
    const total: Tally = { predicted: 0, reported: 0, prompt: 0 };
    let exact = 0;
    for (let i = 0; i < REQUESTS; i++) {
      const adapter = pick(ADAPTERS), tenant = pick(TENANTS), doc = pick(DOCS);
      // Every adapter and tenant sends the same documents: only the salts keep their caches apart.
      const content = `${doc}Question ${Math.floor(rand.next() * 3)} about it.`;
      const res = await gw.fetch(new Request("http://kvgate.test/v1/chat/completions", {
        method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: adapter, cache_salt: tenant, messages: [{ role: "user", content }], max_tokens: 1 }),
      }));
      expect(res.status).toBe(200);
      const body = await res.json();
      expect(body.model).toBe(adapter);
      const overlap = Number(res.headers.get("x-kvgate-overlap-blocks")!.split("/")[0]);
      const prompt = body.usage.prompt_tokens as number, cached = body.usage.prompt_tokens_details.cached_tokens as number;
      // The engine recomputes the last block of a fully cached prompt, as vLLM does.
      const predicted = Math.min(overlap, Math.floor((prompt - 1) / bs)) * bs;
      if (predicted === cached) exact++;
      const t = byAdapter.get(adapter) ?? { predicted: 0, reported: 0, prompt: 0 };
      byAdapter.set(adapter, t);
      for (const x of [t, total]) {
        x.predicted += predicted;
        x.reported += cached;
        x.prompt += prompt;
      }
    }
    const rate = (t: Tally, k: "predicted" | "reported"): number => t[k] / t.prompt;
    console.log(`mixed replay: ${REQUESTS} requests, predicted hit rate ${rate(total, "predicted").toFixed(4)}, reported ${rate(total, "reported").toFixed(4)}, exact per request ${exact}/${REQUESTS}`);
    // Enough reuse that a router blind to adapters or tenants would be far off.
    expect(rate(total, "reported")).toBeGreaterThan(0.3);
    expect(Math.abs(rate(total, "predicted") - rate(total, "reported"))).toBeLessThanOrEqual(0.05);
    expect(byAdapter.size).toBe(8);
    for (const [a, t] of byAdapter) expect(Math.abs(rate(t, "predicted") - rate(t, "reported")), a).toBeLessThanOrEqual(0.05);
    // /metrics shows the same per adapter.
    const text = await (await gw.fetch(new Request("http://kvgate.test/metrics"))).text();
    const metric = (name: string, a: string, source: string): number =>
      Number(new RegExp(`${name}\\{adapter="${a}",model="${SIM_MODEL}",source="${source}"\\} (\\d+)`).exec(text)![1]);
    for (const [a, t] of byAdapter) {
      expect(metric("kvgate_model_cached_tokens_total", a, "reported")).toBe(t.reported);
      expect(metric("kvgate_model_prompt_tokens_total", a, "reported")).toBe(t.prompt);
      const predicted = metric("kvgate_model_cached_tokens_total", a, "predicted") / metric("kvgate_model_prompt_tokens_total", a, "predicted");
      expect(Math.abs(predicted - rate(t, "reported")), a).toBeLessThanOrEqual(0.05);
    }
  }, 120_000);
});
