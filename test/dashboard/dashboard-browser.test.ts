/**
 * The dashboard in headless Chromium (Debian's /usr/bin/chromium through playwright-core): a Node gateway with the
 * built-in simulated fleet and an admin token, the page opened with `?token=`, every request that is not to
 * loopback aborted. Traffic is driven while the page polls; the hit-rate and TTFT charts must gain points and the
 * decisions table rows. The screenshot goes to test-results/dashboard.png (gitignored: an artifact, not a fixture).
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../support/temp-dirs.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimServer } from "../../src/adapter/node/sim-server.ts";
import { startDefaultFleet, SIM_MODEL, type DefaultFleet } from "../../src/sim/default-fleet.ts";
import { post, sseData, startTestGateway, TOKEN, type TestGateway } from "../gateway/helpers.ts";
import { ROOT } from "../conformance/runtimes.ts";

const CHROMIUM = "/usr/bin/chromium";
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const PREFIXES = ["You are a careful assistant for a logistics company. ", "You translate legal contracts into plain English. ", "You review pull requests for a storage engine. "];

const isLoopback = (url: string): boolean => {
  const u = new URL(url);
  return (u.protocol === "http:" || u.protocol === "https:") && (u.hostname === "127.0.0.1" || u.hostname === "localhost" || u.hostname === "[::1]");
};

describe.skipIf(!existsSync(CHROMIUM))("dashboard in headless Chromium", () => {
  let gw: TestGateway;
  let fleet: DefaultFleet;

  beforeAll(async () => {
    // Engine metrics scraped, so the workers panel shows the engines' own KV-cache usage.
    gw = await startTestGateway(["--engine-metrics-ms", "500"]);
    fleet = await startDefaultFleet(gw.gateway, startSimServer, 3, 2048, 16);
  });
  afterAll(async () => {
    await fleet?.close();
    await gw?.close();
    await gw?.gateway.close();
  });

  /** A few streamed chats: each prefix repeated, so later ones hit the worker that cached it. */
  async function traffic(round: number): Promise<void> {
    await Promise.all(PREFIXES.map(async (p, i) => {
      const res = await post(`${gw.url}/v1/chat/completions`, {
        model: SIM_MODEL, stream: true, max_tokens: 6, messages: [{ role: "user", content: `${p.repeat(8)} Question ${round}.${i}?` }],
      });
      expect(res.status).toBe(200);
      await sseData(res);
    }));
  }

  it("shows the hit-rate and TTFT charts and the decisions table filling as traffic flows, with loopback only", async () => {
    const { chromium } = await import("playwright-core");
    const ctx = await chromium.launchPersistentContext(join(tempDir("kvgate-dashboard-"), "profile"), {
      executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1400, height: 1500 },
    });
    const blocked: string[] = [];
    await ctx.route("**/*", (route) => (isLoopback(route.request().url()) ? route.continue() : (blocked.push(route.request().url()), route.abort())));
    try {
      const page = await ctx.newPage();
      const problems: string[] = [];
      page.on("pageerror", (e) => problems.push(e.message));
      page.on("console", (m) => {
        if (m.type() === "error") problems.push(m.text());
      });
      await page.goto(`${gw.url}/dashboard?token=${TOKEN}&poll=300`);
      // The token left the address bar once read.
      expect(new URL(page.url()).searchParams.has("token")).toBe(false);
      await page.waitForFunction(() => Number(document.body.dataset.polls) >= 1, undefined, { timeout: 20_000 });
      const count = () => page.evaluate(() => ({
        hit: Number(document.getElementById("chart-hit")!.dataset.points),
        ttft: Number(document.getElementById("chart-ttft")!.dataset.points),
        decisions: document.querySelectorAll("#decisions tr[data-key]").length,
        workers: document.querySelectorAll("#workers tr").length,
        canvases: document.querySelectorAll(".chart canvas").length,
      }));
      const before = await count();
      expect(before).toMatchObject({ hit: 0, ttft: 0, decisions: 0, workers: 3, canvases: 5 });

      await traffic(0);
      await page.waitForFunction(() => Number(document.getElementById("chart-ttft")!.dataset.points) >= 1
        && Number(document.getElementById("chart-hit")!.dataset.points) >= 1
        && document.querySelectorAll("#decisions tr[data-key]").length >= 3, undefined, { timeout: 20_000 });
      const first = await count();

      // More traffic, in a later interval: the charts gain points, the table rows.
      await new Promise((r) => setTimeout(r, 2_100));
      await traffic(1);
      await traffic(2);
      await page.waitForFunction((n) => document.querySelectorAll("#decisions tr[data-key]").length >= n + 6, first.decisions, { timeout: 20_000 });
      await page.waitForFunction((n) => Number(document.getElementById("chart-ttft")!.dataset.points) > n, first.ttft, { timeout: 20_000 });
      const after = await count();
      expect(after.hit).toBeGreaterThan(first.hit);
      expect(after.decisions).toBeGreaterThan(first.decisions);
      // Each worker that answered shows the closed loop's reported ÷ predicted hits (the engines' events are exact here).
      await page.waitForFunction(() => Array.from(document.querySelectorAll("#workers tr")).some((r) => /answers\)$/.test(r.children[10]?.textContent ?? "")),
        undefined, { timeout: 20_000 });
      const loop = await page.$$eval("#workers tr", (rows) => rows.map((r) => r.children[10]?.textContent ?? ""));
      expect(loop.filter((t) => /^\d+(\.\d+)? \(\d+ answers\)$/.test(t)).length).toBeGreaterThan(0);
      // A decision row lists its candidates, the chosen one marked.
      expect(await page.locator("#decisions table.candidates tr.chosen").count()).toBeGreaterThan(0);

      mkdirSync(join(ROOT, "test-results"), { recursive: true });
      await page.screenshot({ path: join(ROOT, "test-results/dashboard.png"), fullPage: true });
      expect(problems).toEqual([]);
      expect(blocked).toEqual([]);
    } finally {
      await ctx.close();
    }
  }, 120_000);
});
