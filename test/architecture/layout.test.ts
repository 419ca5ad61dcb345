/**
 * @module The layout's two rules, checked on the source: only the runtime adapters and the WASM module loaders touch
 * runtime-specific modules or globals, and no src/ file imports itself back through others.
 */
import { describe, expect, it } from "vitest";
import { importCycles, importGraph, parseSource, sourceFiles, type SourceFile } from "./source-graph.ts";

/** Where runtime-specific code may live: the adapters, and the loader that reads the .wasm file from disk. */
const MAY_TOUCH_RUNTIME = [/^src\/adapter\/(node|bun|deno|workerd)\//, /^src\/wasm\/module-[a-z]+\.ts$/];
const RUNTIME_MODULES = [/^node:/, /^(zeromq|@hono\/node-server|@nats-io\/transport-node|bun|bun:.*|ws|undici)$/, /^(fs|net|http|https|os|path|child_process|worker_threads|stream|zlib|url)(\/.*)?$/];
/** A runtime global read (process.env, Deno.serve, Bun.file, globalThis.process.x, Buffer.from, __dirname). */
const RUNTIME_GLOBAL = /(?:(?<![\w$.])|globalThis\s*\.\s*)(?:(process|Deno|Bun|Buffer)\s*[.[]|(__dirname|__filename)\b)/;

/** String literals blanked (comments are already gone from a SourceFile's text), so "process" in a message is not a use. */
const codeOnly = (text: string): string => text.replace(/(["'`])(?:\\.|(?!\1)[^\\\n])*\1/g, '""');

function runtimeViolations(files: SourceFile[]): string[] {
  const out: string[] = [];
  for (const f of files) {
    if (MAY_TOUCH_RUNTIME.some((re) => re.test(f.path))) continue;
    for (const s of f.specifiers) if (RUNTIME_MODULES.some((re) => re.test(s))) out.push(`${f.path} imports ${s}`);
    const g = RUNTIME_GLOBAL.exec(codeOnly(f.text));
    if (g) out.push(`${f.path} uses the runtime global ${g[1] ?? g[2]}`);
  }
  return out;
}

describe("layout", () => {
  const files = sourceFiles();

  it("reads the whole tree", () => {
    expect(files.length).toBeGreaterThan(150);
    expect(files.some((f) => f.path === "src/gateway/app.ts")).toBe(true);
  });

  it("keeps runtime modules and globals inside src/adapter/ and the WASM loaders", () => {
    expect(runtimeViolations(files)).toEqual([]);
  });

  it("would flag a node: import, a runtime global or a native module added to the gateway", () => {
    const app = files.find((f) => f.path === "src/gateway/app.ts")!;
    const planted = (text: string): SourceFile[] => sourceFiles().map((f) => (f.path === app.path ? parseSource(f.path, text + "\n" + app.text) : f));
    expect(runtimeViolations(planted('import { readFileSync } from "node:fs";'))).toEqual(["src/gateway/app.ts imports node:fs"]);
    expect(runtimeViolations(planted('const { Dealer } = await import("zeromq");'))).toEqual(["src/gateway/app.ts imports zeromq"]);
    expect(runtimeViolations(planted("const port = process.env.PORT;"))).toEqual(["src/gateway/app.ts uses the runtime global process"]);
    expect(runtimeViolations(planted("const d = Deno.args;"))).toEqual(["src/gateway/app.ts uses the runtime global Deno"]);
    expect(runtimeViolations(planted("const v = globalThis.Bun.version;"))).toEqual(["src/gateway/app.ts uses the runtime global Bun"]);
    // Named in a comment or a string is not a use.
    expect(runtimeViolations(planted('// process.env is the adapter\'s\nconst s = "process.env";'))).toEqual([]);
  });

  it("has no import cycle among src/ files", () => {
    expect(importCycles(importGraph(files))).toEqual([]);
  });

  it("finds a cycle when one is there", () => {
    const a = { path: "src/a.ts", text: "", specifiers: ["./b.ts"] };
    const b = { path: "src/b.ts", text: "", specifiers: ["./c.ts", "../src/a.ts"] };
    const c = { path: "src/c.ts", text: "", specifiers: [] };
    expect(importCycles(importGraph([a, b, c]))).toEqual([["src/a.ts", "src/b.ts"]]);
  });
});
