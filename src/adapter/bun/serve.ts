/** @module Serves the gateway on Bun: `bun src/adapter/bun/serve.ts [options]` (options as in kvgate serve --help). */
import { bootFailure, bootGateway, listeningLine } from "../../gateway/boot.ts";
import { zmtpTransport } from "../../zmq/kv-event-subscriber.ts";
import { nodeTcpDialer } from "../node/tcp-dialer.ts";

declare const Bun: {
  argv: string[];
  env: Record<string, string | undefined>;
  file(path: string): { text(): Promise<string> };
  serve(o: { fetch: (req: Request) => Response | Promise<Response>; hostname: string; port: number; idleTimeout: number }): { port: number; stop(force?: boolean): void };
};

try {
  const boot = await bootGateway({ argv: Bun.argv.slice(2), env: Bun.env, readFile: (p) => Bun.file(p).text(), write: (t) => void process.stdout.write(t),
    // The native zeromq module aborts Bun 1.4.5: workers with a zmq_endpoint get kvgate's own ZMTP client (node:net).
    runtime: "Bun", kvEventTransport: zmtpTransport(nodeTcpDialer) });
  if (boot.kind === "gateway") {
    const { gateway, config } = boot;
    // Bun closes connections idle for 10 s by default; a long prefill is silent for longer. 0 = no idle limit.
    const server = Bun.serve({ fetch: (req) => gateway.fetch(req), hostname: config.host, port: config.port, idleTimeout: 0 });
    process.stdout.write(listeningLine(config.host, server.port));
    const timer = setInterval(() => void gateway.tick()?.catch(() => {}), config.tickMs);
    const stop = (): void => {
      clearInterval(timer);
      server.stop(true);
      // Open ZeroMQ connections (and their reconnect timers) would keep the process alive.
      void gateway.close().finally(() => process.exit(0));
    };
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  }
} catch (e) {
  process.stderr.write(bootFailure(e));
  process.exit(1);
}
