/**
 * @module detach() on the engines the gateway runs on: twenty 35-character slices of twenty 10 MB strings keep the
 * big strings alive (~200 MB), their detached copies do not. Measured in a child process that can force a full GC.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SCRIPT = `
import { detach } from "./src/tokenize/detach-string.ts";
const isBun = typeof Bun !== "undefined";
const jsc = isBun ? await import("bun:jsc") : undefined;
const heap = () => jsc ? jsc.heapSize() : process.memoryUsage().heapUsed;
const out = {};
for (const mode of ["slice", "detach"]) {
  const keep = [];
  for (let i = 0; i < 20; i++) {
    const big = "x".repeat(10_000_000) + i;
    const s = big.slice(5, 40);
    keep.push(mode === "detach" ? detach(s) : s);
  }
  if (isBun) for (let k = 0; k < 5; k++) Bun.gc(true); else for (let k = 0; k < 3; k++) globalThis.gc();
  out[mode] = Math.round(heap() / 1e6);
  if (keep.some((s) => s !== "x".repeat(35))) throw new Error("content changed");
}
console.log(JSON.stringify(out));
`;

function run(cmd: string, args: string[]): { slice: number; detach: number } {
  const r = spawnSync(cmd, [...args], { cwd: ROOT, input: SCRIPT, encoding: "utf8", timeout: 60_000 });
  if (r.status !== 0) throw new Error(`${cmd} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").pop()!) as { slice: number; detach: number };
}

describe("detach", () => {
  it("should let a slice's parent be collected on V8 (Node)", () => {
    const m = run(process.execPath, ["--expose-gc", "--import", "tsx", "--input-type=module", "-"]);
    expect(m.slice).toBeGreaterThan(150);
    expect(m.detach).toBeLessThan(50);
  });

  it("should let a slice's parent be collected on JavaScriptCore (Bun)", () => {
    const m = run(fileURLToPath(new URL("node_modules/.bin/bun", `file://${ROOT}`)), ["run", "-"]);
    expect(m.slice).toBeGreaterThan(150);
    expect(m.detach).toBeLessThan(50);
  });
});
