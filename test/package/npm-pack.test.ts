/**
 * @module The published shape: the tarball `npm pack` makes, installed into an empty folder, runs `npx kvgate serve`
 * with its built-in fleet and answers a chat completion (the WASM core ships prebuilt, so nothing is compiled there).
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "../conformance/runtimes.ts";
import { start, waitForOutput, type Proc } from "../conformance/processes.ts";

const dir = mkdtempSync(join(tmpdir(), "kvgate-pack-"));
let proc: Proc | undefined;

afterAll(async () => {
  await proc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("npm pack", () => {
  it("installs into an empty folder and serves a chat completion with `npx kvgate serve`", async () => {
    // The suite's pretest built build/ already; prepack would rebuild it under the other test files' feet.
    const out = execFileSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], { cwd: ROOT, encoding: "utf8" });
    const [packed] = JSON.parse(out) as { filename: string; files: { path: string }[] }[];
    const shipped = packed!.files.map((f) => f.path);
    expect(shipped).toEqual(expect.arrayContaining(["build/release.wasm", "build/release-simd.wasm", "build/core/index.js", "build/dashboard/assets.js", "src/core-entry/index.ts", "src/adapter/node/kvgate.mjs", "src/gateway/app.ts"]));
    expect(shipped.some((p) => p.startsWith("build/embed/"))).toBe(false);
    expect(shipped.some((p) => p.startsWith("test/") || p.startsWith("bench/"))).toBe(false);

    const app = join(dir, "app");
    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "kvgate-consumer", private: true }));
    execFileSync("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", join(dir, packed!.filename)], { cwd: app, encoding: "utf8" });
    expect(existsSync(join(app, "node_modules/kvgate/build/release.wasm"))).toBe(true);
    expect(readdirSync(join(app, "node_modules/.bin"))).toContain("kvgate");
    // kvgate/core from the installed package: the shipped bundle and core, no TypeScript loader involved.
    const hashed = execFileSync(process.execPath, ["--input-type=module", "-e", [
      'import { readFileSync } from "node:fs";',
      'import { createIndex } from "kvgate/core";',
      'const idx = await createIndex(readFileSync(new URL(import.meta.resolve("kvgate/core/release.wasm"))), { capacity: 64, maxSlots: 2 });',
      'console.log(String(idx.hash([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], { blockSize: 4 }).seq[2]));',
    ].join("\n")], { cwd: app, encoding: "utf8" });
    expect(hashed.trim()).toBe("12583592247330656132");

    proc = start("npx", ["--no-install", "kvgate", "serve", "--port", "0", "--sim-workers", "2"], { cwd: app });
    const url = (await waitForOutput(proc, /kvgate listening on (http:\/\/\S+)/, 120_000))[1]!;
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "kvgate-sim", messages: [{ role: "user", content: "Hello from an installed kvgate" }], max_tokens: 8 }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { object: string; choices: { message: { content: string } }[]; usage: { completion_tokens: number } };
    expect(body.object).toBe("chat.completion");
    expect(body.choices[0]!.message.content.length).toBeGreaterThan(0);
    expect(body.usage.completion_tokens).toBe(8);
    expect(res.headers.get("x-kvgate-worker")).toMatch(/^sim-/);
    // The dashboard's bundled client ships in the package (build/dashboard/, resolved through #dashboard-assets).
    const page = await fetch(`${url}/dashboard`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('id="chart-hit"');
  }, 240_000);
});
