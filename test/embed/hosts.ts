/** @module Builds libkvgate (embed/build.sh: idempotent, locked) and the kvgate/core bundle for the embed tests, and runs the host drivers. */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../support/temp-dirs.ts";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const BIN = join(ROOT, "build/embed/bin");
export const FIXTURES = join(ROOT, "test/fixtures/kv-events");

export function buildEmbed(): void {
  execFileSync("bash", [join(ROOT, "embed/build.sh")], { stdio: ["ignore", "ignore", "inherit"] });
}

/** build/core/index.js as `npm run build:core` makes it (pretest does too); serialised across test files. */
export function buildCore(): void {
  mkdirSync(join(ROOT, "build"), { recursive: true });
  execFileSync("flock", [join(ROOT, "build/.core.lock"), "npm", "run", "-s", "build:core"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
}

export function tempFile(name: string, text: string): string {
  const path = join(tempDir("kvgate-embed-"), name);
  writeFileSync(path, text);
  return path;
}

/** Output lines of the C (`c`) or Python (`py`) driver over an op script. */
export function runDriver(host: "c" | "py", script: string): string[] {
  const out = host === "c"
    ? execFileSync(join(BIN, "ops-driver"), [script], { maxBuffer: 1 << 28 })
    : execFileSync("python3", [join(ROOT, "test/embed/ops-driver.py"), script], { maxBuffer: 1 << 28 });
  return out.toString("utf8").trimEnd().split("\n");
}
