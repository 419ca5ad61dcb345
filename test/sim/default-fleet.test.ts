import { describe, it, expect, afterAll } from "vitest";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway, type Gateway } from "../../src/gateway/gateway.ts";
import { startDefaultFleet, SIM_MODEL, type DefaultFleet } from "../../src/sim/default-fleet.ts";
import { startSimServer } from "../../src/adapter/node/sim-server.ts";

let fleet: DefaultFleet | undefined;
afterAll(async () => {
  await fleet?.close();
});

async function chat(gw: Gateway, content: string): Promise<{ status: number; body: any }> {
  const res = await gw.fetch(new Request("http://kvgate.test/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: SIM_MODEL, messages: [{ role: "user", content }], max_tokens: 4 }),
  }));
  return { status: res.status, body: await res.json() };
}

describe("built-in simulated fleet (npm start with no workers)", () => {
  it("should serve at once and report the reused prefix as cached tokens on a repeated long prompt", async () => {
    const loaded = await loadGatewayConfig({ argv: ["--log", "off"], env: {} });
    if (loaded.kind !== "config") throw new Error("expected a config");
    expect(loaded.config.workers).toEqual([]);
    expect(loaded.config.simWorkers).toBe(4);
    const gw = await createGateway(loaded.config, { log: () => {} });
    fleet = await startDefaultFleet(gw, startSimServer, 2, 1024, loaded.config.blockSize);
    const models = await (await gw.fetch(new Request("http://kvgate.test/v1/models"))).json();
    expect(models.data.map((m: { id: string }) => m.id)).toEqual([SIM_MODEL]);
    const prompt = "Shared context for a long conversation. ".repeat(40);
    const first = await chat(gw, prompt);
    expect(first.status).toBe(200);
    expect(first.body.usage.prompt_tokens_details.cached_tokens).toBe(0);
    const second = await chat(gw, prompt);
    expect(second.status).toBe(200);
    // The engine's KV events reached the gateway's index, so the repeat went to the worker holding the prefix.
    expect(second.body.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0.9 * second.body.usage.prompt_tokens);
    expect(gw.state.index.stats().entries).toBeGreaterThan(0);
  });
});
