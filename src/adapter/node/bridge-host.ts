/**
 * @module `kvgate bridge` as a process: stdio, the environment and SIGINT/SIGTERM. Bun and Deno run it too (through
 * the node CLI entry), where it picks kvgate's own ZMTP client: the native module aborts Bun and needs --allow-ffi on Deno.
 */
import { runBridgeCommand } from "../../bridge/bridge-command.ts";
import { engineZmtpSockets } from "../../zmq/zmtp-sockets.ts";
import { nodeTcpDialer } from "./tcp-dialer.ts";
import { loadNativeSockets } from "./zmq-transport.ts";

export function runBridgeCommandOnNode(args: readonly string[]): Promise<number> {
  const portable = "Bun" in globalThis || "Deno" in globalThis;
  const stopped = new Promise<void>((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
  });
  return runBridgeCommand(args, {
    env: process.env,
    out: (t) => void process.stdout.write(t),
    err: (t) => void process.stderr.write(t),
    sockets: async () => (portable ? engineZmtpSockets(nodeTcpDialer) : loadNativeSockets()),
    stopped,
  });
}
