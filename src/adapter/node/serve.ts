/** @module Serves the gateway on Node with @hono/node-server: `kvgate serve` and `node --import tsx src/adapter/node/serve.ts`. */
import { serve } from "@hono/node-server";
import { readFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { pathToFileURL } from "node:url";
import { bootFailure, bootGateway, listeningLine } from "../../gateway/boot.ts";
import type { KvEventHub, KvEventTransport } from "../../events/index.ts";
import { createNodeHttpFetch } from "./http-fetch.ts";
import { headerCoalescingResponse } from "./server-response.ts";
import { directStreams } from "./direct-response.ts";
import { startDefaultFleet, tryItLine, type DefaultFleet } from "../../sim/default-fleet.ts";
import { startSimServer } from "./sim-server.ts";
import { natsBus } from "./nats-bus.ts";
import { openDecisionLogFile } from "./decision-log-file.ts";

/** The ZeroMQ subscriber for workers with a zmq_endpoint (ZMTP for tcp://, the native module for ipc://). */
export async function zmqTransport(hub: KvEventHub, log?: (line: string) => void): Promise<KvEventTransport> {
  return (await import("./zmq-transport.ts")).nodeTransport(hub, log);
}

export async function serveOnNode(argv: readonly string[]): Promise<number> {
  const transport = createNodeHttpFetch();
  const boot = await bootGateway({
    argv, env: process.env, readFile: (p) => readFile(p, "utf8"), write: (t) => void process.stdout.write(t), fetch: transport.fetch,
    runtime: "Node", builtInFleet: true, takesDirectSources: true, kvEventTransport: zmqTransport, syncBus: natsBus, decisionLog: openDecisionLogFile,
  });
  if (boot.kind === "help") return 0;
  const { gateway, config } = boot;
  let sims: DefaultFleet | undefined;
  if (config.workers.length === 0 && config.simWorkers > 0) {
    sims = await startDefaultFleet(gateway, startSimServer, config.simWorkers, config.simGpuBlocks, config.blockSize);
  }
  const server = serve({ fetch: directStreams(gateway.fetch), hostname: config.host, port: config.port, serverOptions: { ServerResponse: headerCoalescingResponse() } }, (info: AddressInfo) => {
    process.stdout.write(listeningLine(config.host, info.port));
    if (sims) process.stdout.write(tryItLine(listeningLine(config.host, info.port).trim().split(" ").pop()!));
  });
  const timer = setInterval(() => void gateway.tick()?.catch(() => {}), config.tickMs);
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  clearInterval(timer);
  await sims?.close();
  await gateway.close();
  // Streams may be open: stop listening, then cut what is left rather than wait for them.
  server.close();
  (server as { closeAllConnections?: () => void }).closeAllConnections?.();
  transport.close();
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  serveOnNode(process.argv.slice(2)).then((code) => process.exit(code), (e) => {
    process.stderr.write(bootFailure(e));
    process.exit(1);
  });
}
