/**
 * kvgate/core outside the browser: the shipped bundle under Node, Bun and Deno, each host handing over the core as
 * bytes (Deno also by file URL), hashing the published Dynamo vectors; and the ABI check of the host-side loader.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../support/temp-dirs.ts";
import { pathToFileURL } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { ROOT, buildCore } from "./hosts.ts";

const BUNDLE = pathToFileURL(join(ROOT, "build/core/index.js")).href;
const WASM = join(ROOT, "build/release.wasm");
const SCRIPT = `
import { readFileSync } from "node:fs";
import { createIndex, defaultCoreUrl } from ${JSON.stringify(BUNDLE)};
const idx = await createIndex(readFileSync(${JSON.stringify(WASM)}), { capacity: 1024, maxSlots: 4 });
const out = [String(idx.xxh3(new TextEncoder().encode("test data"), 1337n)), ...idx.hash([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], { blockSize: 4 }).seq.map(String)];
if (globalThis.Deno) {
  const byUrl = await createIndex(defaultCoreUrl("release"), { capacity: 1024, maxSlots: 4 });
  out.push(String(byUrl.hash([0, 1, 2, 3], { blockSize: 4, namespace: "tenant-a" }).local[0]));
}
console.log(out.join(" "));
`;
const WANT = "13226331709069118873 14643705804678351452 4945711292740353085 12583592247330656132";

const script = join(tempDir("kvgate-core-rt-"), "hash.mjs");
writeFileSync(script, SCRIPT);
const bin = (name: string): string => join(ROOT, "node_modules/.bin", name);

beforeAll(buildCore, 60_000);

describe("kvgate/core bundle under Node, Bun and Deno", () => {
  for (const [name, cmd, args] of [
    ["Node", process.execPath, [script]],
    ["Bun", bin("bun"), [script]],
    ["Deno", bin("deno"), ["run", "--allow-read", "--no-prompt", script]],
  ] as const) {
    it(`should hash the published vectors under ${name}`, () => {
      const out = execFileSync(cmd, args, { encoding: "utf8", env: { ...process.env, NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" } }).trim();
      expect(out).toBe(name === "Deno" ? `${WANT} 17009624042690211646` : WANT);
    }, 60_000);
  }
});
