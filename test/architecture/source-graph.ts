/** @module Reads src/ as an import graph (static and dynamic relative imports), for the layout tests. */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const SRC = join(ROOT, "src");

export interface SourceFile {
  /** Path from the repository root, with forward slashes. */
  path: string;
  /** The code, comments removed. */
  text: string;
  /** Every module specifier it imports or re-exports, static or dynamic, as written. */
  specifiers: string[];
}

const SPECIFIER = /(?:^|[^\w.$])(?:import|export)\s*(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)/g;

/** Comments removed, so a specifier or a global named in prose is not counted; string contents kept. */
function stripComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, (m) => m.replace(/[^\n]/g, " ")).replace(/(^|[^:"'`\\])\/\/[^\n]*/g, "$1");
}

/** One file's code (comments removed) and what it imports. */
export function parseSource(path: string, text: string): SourceFile {
  const code = stripComments(text);
  return { path, text: code, specifiers: [...code.matchAll(SPECIFIER)].map((m) => (m[1] ?? m[2])!) };
}

export function sourceFiles(dir = SRC): SourceFile[] {
  const out: SourceFile[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(ts|mts|mjs|js)$/.test(entry.name) && !entry.name.endsWith(".d.ts")) {
      out.push(parseSource(relative(ROOT, p).split("\\").join("/"), readFileSync(p, "utf8")));
    }
  }
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

/** Edges between src/ files: relative specifiers resolved against the importing file. */
export function importGraph(files: SourceFile[]): Map<string, string[]> {
  const known = new Set(files.map((f) => f.path));
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const deps = f.specifiers.filter((s) => s.startsWith(".")).map((s) => relative(ROOT, resolve(ROOT, dirname(f.path), s)).split("\\").join("/"));
    graph.set(f.path, [...new Set(deps.filter((d) => known.has(d)))]);
  }
  return graph;
}

/** Each strongly connected component of more than one file (or a file importing itself): the import cycles. */
export function importCycles(graph: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}
