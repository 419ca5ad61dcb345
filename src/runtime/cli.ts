/** @module The Node process side of the CLI: argv, stdio and exit codes around src/cli/main.ts. */
import { readFileSync } from "node:fs";
import { runCli } from "../cli/main.ts";
import { isKvgateError } from "../core/errors.ts";

try {
  const code = await runCli(process.argv.slice(2), {
    stdin: () => readFileSync(0, "utf8"),
    write: (t) => process.stdout.write(t),
  });
  process.exitCode = code;
} catch (e) {
  process.stderr.write(`kvgate: ${isKvgateError(e) ? `${e.message} (${e.code})` : String((e as Error)?.stack ?? e)}\n`);
  process.exitCode = 1;
}
