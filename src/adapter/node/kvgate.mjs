#!/usr/bin/env node
// The `kvgate` bin: builds the WASM core on first use (a fresh clone has no build/), then runs the TypeScript CLI through tsx.
import { existsSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const need = ["build/release.wasm", "build/release-simd.wasm"].filter((f) => !existsSync(join(root, f)));
if (need.length > 0) {
  const r = spawnSync(process.execPath, [join(root, "node_modules/assemblyscript/bin/asc.js"), "--version"], { stdio: "ignore" });
  if (r.status !== 0) {
    process.stderr.write("kvgate: assemblyscript is not installed; run npm ci first\n");
    process.exit(1);
  }
  for (const target of ["release", "release-simd"]) {
    const b = spawnSync(process.execPath, [join(root, "node_modules/assemblyscript/bin/asc.js"), "assembly/index.ts", "--target", target], { cwd: root, stdio: ["ignore", "ignore", "inherit"] });
    if (b.status !== 0) process.exit(b.status ?? 1);
  }
}
const { register } = await import("tsx/esm/api");
register();
await import("./cli.ts");
