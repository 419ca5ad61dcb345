/**
 * @module Benchmark dispatcher: `npm run bench -- <name> [args]` (or `npx tsx bench/run.ts <name> [args]`).
 * Each benchmark module exports `main(args: string[]): Promise<void>`; modules load lazily so one broken bench
 * does not stop the others.
 */

interface BenchModule {
  main(args: string[]): Promise<void>;
}

const BENCHES: Record<string, { about: string; load: () => Promise<BenchModule> }> = {
  index: {
    about: "replay of the Mooncake synthetic trace as KV events + find_matches: WASM vs TS reference, event ingestion, 8k-token route cost",
    load: () => import("./index-replay.ts"),
  },
  events: {
    about: "engine KV-event batches (vLLM msgpack, both encodings) decoded and applied, ZeroMQ to index, vs the core's raw apply rate",
    load: () => import("./events.ts"),
  },
  select: {
    about: "routing engine selection per 8k-token request (hash + match + score + booking) over 16, 64 and 256 workers (issue 3)",
    load: () => import("./select.ts"),
  },
  tokenize: {
    about: "prompt tokenization (Qwen3 precise and approximate) at 1k and 8k tokens",
    load: () => import("./tokenize.ts"),
  },
  zmtp: {
    about: "kvgate's ZMTP client vs the native zeromq module on Node: engine KV events received (and applied) per cycle",
    load: () => import("./zmtp.ts"),
  },
  embed: {
    about: "the C host (libkvgate, wasm2c) vs the JS host: vLLM batch apply, binary batch apply, find_matches; JS / C ratios (issue 15)",
    load: () => import("./embed.ts"),
  },
  gateway: {
    about: "kvgate in front of one simulated worker, on Node and Bun: added latency and throughput vs direct (issue 4)",
    load: () => import("./gateway.ts"),
  },
};

function usage(): void {
  console.log("usage: npm run bench -- <name> [args]\n\nbenchmarks:");
  for (const [name, b] of Object.entries(BENCHES)) console.log(`  ${name.padEnd(8)} ${b.about}`);
}

async function run(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === "help" || name === "--help" || name === "-h") {
    usage();
    return 0;
  }
  const bench = BENCHES[name];
  if (!bench) {
    console.error(`unknown benchmark "${name}"`);
    usage();
    return 2;
  }
  const mod = await bench.load();
  await mod.main(args);
  return 0;
}

run(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (e: unknown) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : e);
    process.exitCode = 1;
  },
);
