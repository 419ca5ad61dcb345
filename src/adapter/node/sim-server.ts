/**
 * @module Runs simulated engines on Node: an in-process `startSimServer` for tests and the default fleet, and the
 * host that `kvgate sim` runs on (signals, stdout). Everything else about the sim is runtime-neutral.
 */
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import { createKvIndex } from "../../core/create-kv-index.ts";
import type { KvIndex } from "../../core/kv-index.ts";
import { wasmBlockHasher } from "../../sim/block-hasher.ts";
import { HttpPushSink } from "../../sim/http-push-sink.ts";
import { createSimApp } from "../../sim/sim-app.ts";
import { runSimCommand, type SimCommandConfig, type SimHost } from "../../sim/sim-command.ts";
import { SimEngine } from "../../sim/sim-engine.ts";
import { resolveSimOptions } from "../../sim/sim-options.ts";
import type { SimServer, SimServerOptions } from "../../sim/sim-server.ts";

export type { SimServer, SimServerOptions };

// Hashing is stateless and synchronous, so every engine of the process can share one core instance.
let hashIndex: Promise<KvIndex> | undefined;

/** Starts one simulated engine behind an HTTP server. `workerId` defaults to `sim-<port>`. */
export async function startSimServer(opts: SimServerOptions = {}): Promise<SimServer> {
  const { host = "127.0.0.1", port = 0, events, sinks = [], clock, ...engineOptions } = opts;
  const blockSize = resolveSimOptions(engineOptions).blockSize;
  hashIndex ??= createKvIndex({ capacity: 1024, maxSlots: 1 });
  const hasher = wasmBlockHasher(await hashIndex, blockSize);
  let engine: SimEngine | undefined;
  let fetchHandler: ((req: Request) => Response | Promise<Response>) | undefined;
  const server = await new Promise<Server>((resolve, reject) => {
    const s = serve({ fetch: (req) => fetchHandler!(req), port, hostname: host }, (info: AddressInfo) => {
      // Built in the listening callback, before any connection is served, so the default id can use the port.
      try {
        const workerId = engineOptions.workerId ?? `sim-${info.port}`;
        const all = [...sinks];
        if (events) all.push(new HttpPushSink({ ...events, workerId, dpRank: engineOptions.dpRank ?? 0, clock }));
        engine = new SimEngine({ ...engineOptions, workerId }, { hasher, clock, sinks: all });
        fetchHandler = createSimApp(engine).fetch;
        resolve(s as Server);
      } catch (e) {
        s.close();
        reject(e);
      }
    }) as Server;
    s.once("error", reject);
  });
  const actual = (server.address() as AddressInfo).port;
  const shown = host.includes(":") ? `[${host}]` : host === "0.0.0.0" ? "127.0.0.1" : host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${shown}:${actual}`,
    port: actual,
    engine: engine!,
    close: () => (closing ??= (async () => {
      await engine!.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    })()),
  };
}

/** `kvgate sim` on Node: serves until SIGINT or SIGTERM. */
export function nodeSimHost(): SimHost {
  return {
    start: (c: SimCommandConfig) => startSimServer({ ...c.engine, host: c.host, port: c.port, events: c.events }),
    write: (t) => void process.stdout.write(t),
    stopped: () => new Promise<void>((resolve) => {
      process.once("SIGINT", () => resolve());
      process.once("SIGTERM", () => resolve());
    }),
    env: process.env,
  };
}

/** Entry for the CLI dispatcher: `runSimCommandOnNode(process.argv.slice(3))`. */
export function runSimCommandOnNode(args: readonly string[]): Promise<number> {
  return runSimCommand(args, nodeSimHost());
}
