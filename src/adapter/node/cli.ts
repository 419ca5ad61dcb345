/** @module The Node process side of the CLI: argv, stdio and exit codes around src/cli/main.ts. */
import { readFileSync } from "node:fs";
import { runCli } from "../../cli/main.ts";
import { isKvgateError } from "../../core/errors.ts";
import { serveOnNode } from "./serve.ts";
import { runReplayCommandOnNode } from "./replay-host.ts";
import { runSimCommandOnNode } from "./sim-server.ts";

// Commands that serve until stopped or start servers own the process (signals, sockets), so they start here.
const PROCESS_COMMANDS: Record<string, (args: readonly string[]) => Promise<number>> = {
  serve: serveOnNode,
  sim: runSimCommandOnNode,
  replay: runReplayCommandOnNode,
  // Loaded on demand: the bridge pulls in the native zeromq module, which no other command needs.
  bridge: async (args) => (await import("./bridge-host.ts")).runBridgeCommandOnNode(args),
};

try {
  const [cmd, ...rest] = process.argv.slice(2);
  const own = cmd === undefined ? undefined : PROCESS_COMMANDS[cmd];
  process.exitCode = own ? await own(rest) : await runCli(process.argv.slice(2), {
    stdin: () => readFileSync(0, "utf8"),
    write: (t) => process.stdout.write(t),
    readText: (p) => readFileSync(p, "utf8"),
  });
} catch (e) {
  process.stderr.write(`kvgate: ${isKvgateError(e) ? `${e.message} (${e.code})` : String((e as Error)?.stack ?? e)}\n`);
  process.exitCode = 1;
}
