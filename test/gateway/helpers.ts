/** @module In-process gateways for the gateway tests: a real HTTP listener (@hono/node-server) around createGateway. */
import { serve } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway, type Gateway, type GatewayHost } from "../../src/gateway/gateway.ts";
import { startSimServer, type SimServer, type SimServerOptions } from "../../src/adapter/node/sim-server.ts";
import { realClock } from "../../src/sim/sim-clock.ts";

export const TOKEN = "test-token";

export interface TestGateway {
  url: string;
  gateway: Gateway;
  close(): Promise<void>;
}

/** A gateway configured by `argv` (as `kvgate serve` would be), listening on a loopback port. */
export async function startTestGateway(argv: string[] = [], host: GatewayHost = {}): Promise<TestGateway> {
  const loaded = await loadGatewayConfig({ argv: ["--admin-token", TOKEN, "--log", "off", ...argv], env: {} });
  if (loaded.kind !== "config") throw new Error("help");
  const gateway = await createGateway(loaded.config, host);
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: gateway.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as Server)) as Server;
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    gateway,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

/** A simulated engine pushing its KV events to `gatewayUrl`. */
export function startSim(gatewayUrl: string | undefined, opts: SimServerOptions = {}): Promise<SimServer> {
  return startSimServer({
    clock: realClock(), speedupRatio: 50, numGpuBlocks: 2048, maxModelLen: 8192, ...opts,
    events: gatewayUrl ? { url: `${gatewayUrl}/admin/kv-events`, token: TOKEN, flushIntervalMs: 5 } : undefined,
  });
}

export async function addWorker(gatewayUrl: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${gatewayUrl}/admin/workers`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` }, body: JSON.stringify(body) });
}

export function post(url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body), signal });
}

/** The `data:` payloads of a whole SSE body. */
export async function sseData(res: Response): Promise<string[]> {
  const text = await res.text();
  return text.split("\n\n").filter((e) => e.length > 0).map((e) => e.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n"));
}
