/**
 * @module Trying disaggregated serving locally: `kvgate serve --sim-prefill-workers N` builds a prefill + decode fleet
 * of simulated engines that serves both flows at once; the options are documented in `kvgate serve --help` and a
 * worker's `bootstrap_port` is read from its spec.
 */
import { afterEach, describe, expect, it } from "vitest";
import { parseWorker } from "../../src/gateway/config.ts";
import { loadGatewayConfig, serveHelp } from "../../src/gateway/config-load.ts";
import { createGateway, type Gateway } from "../../src/gateway/gateway.ts";
import { startDefaultFleet, SIM_MODEL, type DefaultFleet } from "../../src/sim/default-fleet.ts";
import { startSimServer } from "../../src/adapter/node/sim-server.ts";

let fleet: DefaultFleet | undefined;
afterEach(async () => {
  await fleet?.close();
  fleet = undefined;
});

async function gatewayFor(argv: string[]): Promise<Gateway> {
  const loaded = await loadGatewayConfig({ argv: ["--log", "off", ...argv], env: {} });
  if (loaded.kind !== "config") throw new Error("expected a config");
  return createGateway(loaded.config, { log: () => {} });
}

async function streamChat(gw: Gateway, content: string): Promise<{ headers: Headers; usage: Record<string, any> }> {
  const res = await gw.fetch(new Request("http://kvgate.test/v1/chat/completions", {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: SIM_MODEL, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content }], max_tokens: 4 }),
  }));
  expect(res.status).toBe(200);
  const events = (await res.text()).split("\n\n").filter(Boolean).map((e) => e.slice(6));
  expect(events.at(-1)).toBe("[DONE]");
  return { headers: res.headers, usage: JSON.parse(events.at(-2)!).usage };
}

describe("built-in disaggregated fleet", () => {
  for (const flow of ["vllm", "sglang"]) {
    it(`should serve streams with remote prefill in the ${flow} flow`, async () => {
      const gw = await gatewayFor(["--sim-prefill-workers", "1", "--disaggregation", flow, "--disagg-local-prefill-below", "0"]);
      expect(gw.state.config.simPrefillWorkers).toBe(1);
      fleet = await startDefaultFleet(gw, startSimServer, 2, 1024, 16);
      expect(gw.state.fleet.list().map((w) => `${w.id}:${w.role}`)).toEqual(["sim-prefill-0:prefill", "sim-decode-0:decode", "sim-decode-1:decode"]);
      const r = await streamChat(gw, "Shared context for a long conversation. ".repeat(30));
      expect(r.headers.get("x-kvgate-prefill")).toBe("remote");
      expect(r.headers.get("x-kvgate-prefill-worker")).toBe("sim-prefill-0");
      expect(r.usage.prompt_tokens_details.cached_tokens).toBe(Math.floor((r.usage.prompt_tokens - 1) / 16) * 16);
      expect(gw.state.router.liveBookings).toBe(0);
    });
  }

  it("should document the options and read bootstrap_port", () => {
    const help = serveHelp();
    for (const flag of ["--disaggregation vllm|sglang", "--disagg-local-prefill-below", "--disagg-prefill-busy-frac", "--sim-prefill-workers"]) expect(help).toContain(flag);
    expect(parseWorker("url=http://p:30000,role=prefill,bootstrap_port=8998")).toMatchObject({ role: "prefill", bootstrapPort: 8998 });
    expect(() => parseWorker("url=http://p:30000,bootstrap_port=70000")).toThrow(/bootstrap_port/);
  });
});
