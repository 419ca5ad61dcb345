/**
 * @module A disaggregated fleet for the gateway tests: a real kvgate listener and simulated prefill and decode engines
 * on loopback HTTP, their KV events pushed to the gateway, and a record of every request kvgate sent a worker.
 */
import { createServer, type Server } from "node:net";
import type { AddressInfo } from "node:net";
import type { SimServer, SimServerOptions } from "../../src/adapter/node/sim-server.ts";
import { startSim, startTestGateway, type TestGateway } from "./helpers.ts";

export const MODEL = "pd-model";

const deadServers: Server[] = [];

/**
 * A worker address that cuts every connection at once, as an unreachable engine fails (before any headers), on a port
 * it keeps until `closeDeadWorkers`: a server started and closed instead could see its port taken by another test's
 * server in a busy run.
 */
export async function deadWorker(): Promise<{ url: string }> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  deadServers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

export async function closeDeadWorkers(): Promise<void> {
  await Promise.all(deadServers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
}

export interface SentRequest {
  url: string;
  body: string;
}

export interface PdFleet {
  gw: TestGateway;
  prefill: SimServer[];
  decode: SimServer[];
  sent: SentRequest[];
  /** Requests sent to a worker's completion endpoints (not KV transfers between engines, which kvgate never sees). */
  sentTo(server: SimServer): Record<string, unknown>[];
  metrics(): Promise<string>;
  close(): Promise<void>;
}

export interface PdOptions {
  prefill?: number;
  decode?: number;
  prefillOpts?: SimServerOptions | ((i: number) => SimServerOptions);
  decodeOpts?: SimServerOptions;
  /** Prefill workers registered at these URLs instead of engines (dead endpoints, foreign engines). */
  extraPrefillUrls?: string[];
  /** Decode workers at these URLs (ids dx0, dx1, …), registered before the engines. */
  extraDecodeUrls?: string[];
}

export async function pdFleet(argv: string[], o: PdOptions = {}): Promise<PdFleet> {
  const sent: SentRequest[] = [];
  const recording: typeof fetch = (input, init) => {
    if (typeof init?.body === "string") sent.push({ url: String(input), body: init.body });
    return fetch(input, init);
  };
  const gw = await startTestGateway(argv, { fetch: recording });
  const fleet = gw.gateway.state.fleet;
  const prefill: SimServer[] = [], decode: SimServer[] = [];
  for (let i = 0; i < (o.prefill ?? 2); i++) {
    const extra = typeof o.prefillOpts === "function" ? o.prefillOpts(i) : o.prefillOpts;
    const s = await startSim(gw.url, { model: MODEL, workerId: `p${i}`, role: "prefill", ...extra });
    prefill.push(s);
    await fleet.add({ url: s.url, id: `p${i}`, models: [MODEL], role: "prefill", kvEvents: true, blockSize: 16, bootstrapPort: s.port, maxBatchedTokens: s.engine.options.maxNumBatchedTokens });
  }
  for (const [i, url] of (o.extraPrefillUrls ?? []).entries()) {
    await fleet.add({ url, id: `px${i}`, models: [MODEL], role: "prefill", kvEvents: false, blockSize: 16, bootstrapPort: Number(new URL(url).port) });
  }
  for (const [i, url] of (o.extraDecodeUrls ?? []).entries()) {
    await fleet.add({ url, id: `dx${i}`, models: [MODEL], role: "decode", kvEvents: false, blockSize: 16 });
  }
  for (let i = 0; i < (o.decode ?? 2); i++) {
    const s = await startSim(gw.url, { model: MODEL, workerId: `d${i}`, role: "decode", ...o.decodeOpts });
    decode.push(s);
    await fleet.add({ url: s.url, id: `d${i}`, models: [MODEL], role: "decode", kvEvents: true, blockSize: 16 });
  }
  return {
    gw, prefill, decode, sent,
    sentTo: (s) => sent.filter((r) => r.url.startsWith(s.url + "/v1/")).map((r) => JSON.parse(r.body) as Record<string, unknown>),
    metrics: async () => (await fetch(`${gw.url}/metrics`)).text(),
    async close() {
      await Promise.allSettled([...prefill, ...decode].map((s) => s.close()));
      await gw.close();
    },
  };
}

/** The value of one Prometheus series, labels in any order. */
export function series(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = line.match(/^([^{ ]+)(?:\{(.*)\})? (\S+)$/);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v) && Object.keys(have).length === Object.keys(labels).length) return Number(m[3]);
  }
  return 0;
}

/** Polls `cond` every few ms (engine and KV-event work happens in the background); fails after `ms`. */
export async function until(cond: () => boolean, ms = 5_000, what = "condition"): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Nothing booked anywhere: every router booking of the request's legs was released. */
export function noBookings(f: PdFleet): boolean {
  return f.gw.gateway.state.router.liveBookings === 0;
}
