/**
 * @module Serves the gateway on Deno: `deno run --allow-net --allow-read --allow-env src/runtime/deno.ts [options]`
 * (add --allow-ffi for workers with a zmq_endpoint).
 */
import { bootFailure, bootGateway, listeningLine } from "../gateway/boot.ts";

declare const Deno: {
  args: string[];
  env: { toObject(): Record<string, string> };
  readTextFile(path: string): Promise<string>;
  stdout: { writeSync(b: Uint8Array): number };
  stderr: { writeSync(b: Uint8Array): number };
  serve(o: { hostname: string; port: number; onListen(a: { port: number }): void }, h: (req: Request) => Response | Promise<Response>): { shutdown(): Promise<void> };
  addSignalListener(s: "SIGINT" | "SIGTERM", f: () => void): void;
  exit(code: number): never;
};

const encoder = new TextEncoder();
const out = (t: string): void => void Deno.stdout.writeSync(encoder.encode(t));

try {
  const boot = await bootGateway({
    argv: Deno.args, env: Deno.env.toObject(), readFile: (p) => Deno.readTextFile(p), write: out, runtime: "Deno",
    // The npm `zeromq` native module loads on Deno 2.9 (needs --allow-ffi); only imported when a worker has a zmq_endpoint.
    kvEventTransport: async (hub) => new (await import("./zmq-subscriber.ts")).ZmqKvEventSubscriber(hub.index, { hub }),
  });
  if (boot.kind === "gateway") {
    const { gateway, config } = boot;
    const server = Deno.serve({ hostname: config.host, port: config.port, onListen: ({ port }) => out(listeningLine(config.host, port)) }, (req) => gateway.fetch(req));
    const timer = setInterval(() => void gateway.tick()?.catch(() => {}), config.tickMs);
    const stop = (): void => {
      clearInterval(timer);
      void server.shutdown().then(() => gateway.close()).finally(() => Deno.exit(0));
    };
    Deno.addSignalListener("SIGINT", stop);
    Deno.addSignalListener("SIGTERM", stop);
  }
} catch (e) {
  Deno.stderr.writeSync(encoder.encode(bootFailure(e)));
  Deno.exit(1);
}
