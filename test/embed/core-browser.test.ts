/**
 * kvgate/core in headless Chromium: a page with no bundler imports the shipped build/core/index.js from a loopback
 * HTTP server, loads the core from a URL and from bytes, and hashes the published Dynamo vectors.
 */
import { readFileSync, existsSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { tempDir } from "../support/temp-dirs.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, buildCore } from "./hosts.ts";
import { ABI_VERSION } from "../../src/wasm/abi.ts";

const CHROMIUM = "/usr/bin/chromium";
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const SERVED: Record<string, string> = {
  "/build/core/index.js": "text/javascript",
  "/build/release.wasm": "application/wasm",
  "/build/release-simd.wasm": "application/wasm",
};

const PAGE = `<!doctype html><meta charset="utf-8"><title>kvgate/core</title><link rel="icon" href="data:,">
<script type="module">
import { createIndex, defaultCoreUrl, ABI_VERSION } from "/build/core/index.js";
try {
  const fromUrl = await createIndex(defaultCoreUrl("release-simd"), { capacity: 1024, maxSlots: 4 });
  const bytes = await (await fetch("/build/release.wasm")).arrayBuffer();
  const fromBytes = await createIndex(new Uint8Array(bytes), { capacity: 1024, maxSlots: 4 });
  const str = (xs) => xs.map(String);
  const range = (a, b) => Array.from({ length: b - a }, (_, i) => a + i);
  const h = fromUrl.hash(range(1, 13), { blockSize: 4 });
  fromBytes.stored("w1", 0, null, h.local.map((local, i) => ({ hash: BigInt(100 + i), local })));
  const m = fromBytes.findMatches(range(1, 13), { blockSize: 4 });
  window.__result = {
    abi: ABI_VERSION, wasmUrl: defaultCoreUrl("release-simd").pathname,
    testData: String(fromUrl.xxh3(new TextEncoder().encode("test data"), 1337n)),
    local: str(h.local), seq: str(h.seq),
    lora: str(fromBytes.hash(range(0, 4), { blockSize: 4, lora: "adapter-a" }).local),
    ns: String(fromUrl.seedFor({ namespace: "tenant-a" })),
    nsLocal: str(fromBytes.hash(range(0, 4), { blockSize: 4, namespace: "tenant-a" }).local),
    bs16: str(fromUrl.hash(range(0, 16), { blockSize: 16 }).local),
    matches: m.matches.map((x) => [x.worker, x.blocks, x.treeSize]),
  };
} catch (e) {
  window.__result = { error: String(e && e.stack || e) };
}
</script>`;

let server: Server;
let base = "";
const requests: string[] = [];

beforeAll(async () => {
  buildCore();
  server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    requests.push(path);
    if (path === "/") {
      res.writeHead(200, { "content-type": "text/html" }).end(PAGE);
    } else if (SERVED[path]) {
      res.writeHead(200, { "content-type": SERVED[path]! }).end(readFileSync(join(ROOT, path)));
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe.skipIf(!existsSync(CHROMIUM))("kvgate/core in headless Chromium", () => {
  it("imports the shipped bundle with no bundler and hashes the published vectors", async () => {
    const { chromium } = await import("playwright-core");
    const ctx = await chromium.launchPersistentContext(join(tempDir("kvgate-core-"), "profile"), { executablePath: CHROMIUM, headless: true, args: ARGS });
    try {
      const page = await ctx.newPage();
      const problems: string[] = [];
      page.on("pageerror", (e) => problems.push(e.message));
      await page.goto(`${base}/`);
      await page.waitForFunction(() => (window as unknown as { __result?: unknown }).__result !== undefined, undefined, { timeout: 30_000 });
      const result = await page.evaluate(() => (window as unknown as { __result: Record<string, unknown> }).__result);
      expect(problems).toEqual([]);
      expect(result).toEqual({
        abi: ABI_VERSION, wasmUrl: "/build/release-simd.wasm",
        testData: "13226331709069118873",
        local: ["14643705804678351452", "16777012769546811212", "483935686894639516"],
        seq: ["14643705804678351452", "4945711292740353085", "12583592247330656132"],
        lora: ["6665157333201000639"],
        ns: "1948188790972764086",
        nsLocal: ["17009624042690211646"],
        bs16: ["15310707395893867146"],
        matches: [["w1", 3, 3]],
      });
      // Only the page, the bundle and the two cores: the bundle imports nothing else.
      expect([...new Set(requests)].sort()).toEqual(["/", "/build/core/index.js", "/build/release-simd.wasm", "/build/release.wasm"]);
    } finally {
      await ctx.close();
    }
  }, 90_000);
});
