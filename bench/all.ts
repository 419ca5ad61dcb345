/**
 * @module `npm run bench -- all`: every benchmark in one run, in one process after another, and one JSON with every
 * figure and the machine's load around each; `--compare FILE` prints each figure's ratio to an earlier all.json, so
 * a change that slows a path shows itself (printed, never a test).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { loadavg } from "node:os";
import { writeResults } from "./harness.ts";
import { BENCHES } from "./registry.ts";

interface AllArgs {
  compare?: string;
  skip: string[];
}

function parseArgs(args: string[]): AllArgs {
  const a: AllArgs = { skip: [] };
  for (let i = 0; i < args.length; i++) {
    const k = args[i]!;
    const v = (): string => {
      const x = args[++i];
      if (x === undefined) throw new Error(`${k} needs a value`);
      return x;
    };
    if (k === "--compare") a.compare = v();
    else if (k === "--skip") a.skip = v().split(",").filter(Boolean);
    else throw new Error(`unknown flag ${k} (flags: --compare FILE, --skip a,b)`);
  }
  for (const s of a.skip) if (!(s in BENCHES)) throw new Error(`--skip: no benchmark ${s}`);
  return a;
}

const RESULTS = new URL("./results/", import.meta.url);

/** Result files written since `since` (a bench may write several, e.g. events and events-host). */
function writtenSince(since: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  let names: string[] = [];
  try {
    names = readdirSync(RESULTS);
  } catch {
    return out;
  }
  for (const f of names) {
    if (!f.endsWith(".json") || f === "all.json") continue;
    const file = new URL(f, RESULTS);
    if (statSync(file).mtimeMs >= since) out[f.slice(0, -5)] = JSON.parse(readFileSync(file, "utf8"));
  }
  return out;
}

/**
 * Every number in a result, by its path. Arrays longer than 16 (per-request samples) are left out: the figures a
 * bench prints are its summaries.
 */
export function figures(v: unknown, path = "", out = new Map<string, number>()): Map<string, number> {
  if (typeof v === "number" && Number.isFinite(v)) out.set(path, v);
  else if (Array.isArray(v)) {
    if (v.length <= 16) v.forEach((x, i) => figures(x, `${path}[${i}]`, out));
  } else if (v && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) if (k !== "environment") figures(x, path ? `${path}.${k}` : k, out);
  }
  return out;
}

/** Lines `path  old → new  ratio` for every figure both runs have and that changed. */
export function comparison(before: unknown, after: unknown): string[] {
  const b = figures(before), a = figures(after);
  const lines: string[] = [];
  for (const [path, now] of a) {
    const then = b.get(path);
    if (then === undefined || then === now) continue;
    const ratio = then === 0 ? "-" : `${(now / then).toFixed(3)}x`;
    lines.push(`${path.padEnd(72)} ${String(+then.toPrecision(6)).padStart(12)} -> ${String(+now.toPrecision(6)).padStart(12)}  ${ratio}`);
  }
  return lines.sort();
}

export async function main(args: string[]): Promise<number> {
  const a = parseArgs(args);
  const runs: Record<string, unknown> = {};
  for (const [name, b] of Object.entries(BENCHES)) {
    if (a.skip.includes(name)) continue;
    console.log(`\n=== bench ${name}: ${b.about}`);
    const start = Date.now();
    const load = { start: loadavg() };
    let error: string | undefined;
    try {
      await (await b.load()).main([]);
    } catch (e) {
      error = e instanceof Error ? e.message : String(e);
      console.error(`bench ${name} failed: ${error}`);
    }
    runs[name] = { loadAverage: { ...load, end: loadavg() }, seconds: (Date.now() - start) / 1000, error, results: writtenSince(start - 1) };
  }
  const path = writeResults("all", { runs });
  console.log(`\nwrote ${path}`);
  if (a.compare) {
    const before = JSON.parse(readFileSync(a.compare, "utf8")) as { runs?: unknown };
    const lines = comparison(before.runs, runs);
    console.log(`\ncompared with ${a.compare} (new / old; a time that grew or a rate that fell is slower):`);
    for (const l of lines) console.log(l);
  }
  return Object.values(runs).some((r) => (r as { error?: string }).error) ? 1 : 0;
}
