/** @module The Node process side of the CLI: argv, stdio and exit codes around src/cli/main.ts. */
import { readFileSync } from "node:fs";
import { runCli } from "../cli/main.ts";
import { isKvgateError } from "../core/errors.ts";
import { serveOnNode } from "./node.ts";
import { runSimCommandOnNode } from "./sim-node.ts";

try {
  const argv = process.argv.slice(2);
  // Commands that serve until stopped own the process (signals, sockets), so they start here, not in runCli.
  const code = argv[0] === "sim" ? await runSimCommandOnNode(argv.slice(1)) : argv[0] === "serve" ? await serveOnNode(argv.slice(1)) : await runCli(argv, {
    stdin: () => readFileSync(0, "utf8"),
    write: (t) => process.stdout.write(t),
  });
  process.exitCode = code;
} catch (e) {
  process.stderr.write(`kvgate: ${isKvgateError(e) ? `${e.message} (${e.code})` : String((e as Error)?.stack ?? e)}\n`);
  process.exitCode = 1;
}
