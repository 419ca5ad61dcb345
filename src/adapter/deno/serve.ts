/** @module Serves the gateway on Deno: `deno run --allow-net --allow-read --allow-env src/adapter/deno/serve.ts [options]`. */
import { bootFailure, bootGateway, listeningLine } from "../../gateway/boot.ts";
import { zmtpTransport } from "../../zmq/kv-event-subscriber.ts";
import { nodeTcpDialer } from "../node/tcp-dialer.ts";

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
    // kvgate's own ZMTP client over node:net: the native `zeromq` module would need --allow-ffi.
    kvEventTransport: zmtpTransport(nodeTcpDialer),
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
