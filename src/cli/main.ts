/** @module kvgate's command dispatcher: pure functions from arguments to output, run by src/adapter/node/cli.ts. */
import { createKvIndex } from "../core/create-kv-index.ts";
import { serveHelp } from "../gateway/config-load.ts";
import { HASH_USAGE, runHash } from "./hash-command.ts";
import { runExplain } from "./explain-command.ts";

export const USAGE = `usage: kvgate <command> [options]
commands:
  hash     print a prompt's block hashes (local and chained)
  serve    run the gateway (kvgate serve --help lists every option)
  sim      run a simulated OpenAI-compatible engine (kvgate sim --help)
  replay   replay a trace through the router under five policies (kvgate replay --help)
  bridge   forward an engine's ZeroMQ KV events to a router over HTTP (kvgate bridge --help)
  explain  replay a decision log (serve --decision-log) through the WASM core (kvgate explain --help)
  help     this text
${HASH_USAGE}`;

export interface CliIo {
  stdin(): string;
  write(text: string): void;
  /** Reads a local file as UTF-8 (kvgate explain); hosts without files leave it out. */
  readText?(path: string): string;
}

/** Runs one command; resolves to the process exit code. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case "hash": {
      const index = await createKvIndex({ capacity: 1024, maxSlots: 1 });
      io.write(runHash(index, rest, io.stdin));
      return 0;
    }
    case "explain": {
      const readText = io.readText;
      if (!readText) {
        io.write("kvgate explain: this host cannot read files\n");
        return 2;
      }
      return runExplain(rest, { readText, write: (t) => io.write(t) });
    }
    case "serve":
      // Serving owns the process (sockets, signals), so src/adapter/node/cli.ts starts it; only the help is pure.
      io.write(serveHelp());
      return rest.some((a) => a === "--help" || a === "-h") ? 0 : 2;
    case undefined:
    case "help":
    case "--help":
    case "-h":
      io.write(USAGE + "\n");
      return cmd === undefined ? 2 : 0;
    default:
      io.write(`unknown command ${JSON.stringify(cmd)}\n${USAGE}\n`);
      return 2;
  }
}
