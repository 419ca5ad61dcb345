/**
 * @module Benchmark dispatcher: `npm run bench -- <name> [args]` (or `npx tsx bench/run.ts <name> [args]`), and
 * `npm run bench -- all [--compare FILE]` for every benchmark in one run (all.ts).
 */

import { BENCHES } from "./registry.ts";

function usage(): void {
  console.log("usage: npm run bench -- <name> [args]\n       npm run bench -- all [--compare FILE] [--skip a,b]\n\nbenchmarks:");
  for (const [name, b] of Object.entries(BENCHES)) console.log(`  ${name.padEnd(8)} ${b.about}`);
  console.log(`  ${"all".padEnd(8)} every benchmark above in one run, one JSON (bench/results/all.json) with the load average around each`);
}

async function run(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === "help" || name === "--help" || name === "-h") {
    usage();
    return 0;
  }
  if (name === "all") return (await import("./all.ts")).main(args);
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
