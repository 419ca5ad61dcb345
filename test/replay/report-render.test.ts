/**
 * Renders the replay's HTML report in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core),
 * takes a screenshot, and checks the plots and the table are there and drawn, with no network access at all.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../support/temp-dirs.ts";
import { describe, expect, it } from "vitest";
import { renderReport } from "../../src/replay/report-html.ts";
import { REPLAY_POLICIES } from "../../src/replay/replay-policies.ts";
import { syntheticResults } from "./helpers.ts";

const CHROMIUM = "/usr/bin/chromium";
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

describe.skipIf(!existsSync(CHROMIUM))("HTML report in headless Chromium", () => {
  it("opens from the file, draws every plot and the policy table, and screenshots", async () => {
    const { chromium } = await import("playwright-core");
    const dir = tempDir("kvgate-report-");
    const file = join(dir, "report.html");
    writeFileSync(file, renderReport(syntheticResults()));
    const ctx = await chromium.launchPersistentContext(join(dir, "profile"), { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1400, height: 900 } });
    try {
      const page = await ctx.newPage();
      const network: string[] = [];
      const problems: string[] = [];
      await page.route("**/*", (route) => {
        const url = route.request().url();
        if (url.startsWith("file:")) return route.continue();
        network.push(url);
        return route.abort();
      });
      page.on("console", (m) => m.type() === "error" && problems.push(m.text()));
      page.on("pageerror", (e) => problems.push(e.message));
      await page.goto(`file://${file}`);
      const plots = await page.$$eval("svg[data-plot]", (svgs) => svgs.map((s) => {
        const box = s.getBoundingClientRect();
        const lines = Array.from(s.querySelectorAll("polyline[data-series]")).map((p) => (p.getAttribute("points") ?? "").trim().split(/\s+/).filter(Boolean).length);
        return { id: s.getAttribute("data-plot"), width: box.width, height: box.height, lines };
      }));
      expect(plots.map((p) => p.id)).toEqual(["ttft-cdf", "hit-rate", ...REPLAY_POLICIES.map((p) => `load-${p}`)]);
      for (const p of plots) {
        expect(p.width).toBeGreaterThan(300);
        expect(p.height).toBeGreaterThan(200);
        expect(p.lines.length).toBe(p.id!.startsWith("load-") ? 4 : REPLAY_POLICIES.length);
        expect(Math.min(...p.lines)).toBeGreaterThan(10);
      }
      expect(await page.$$eval("table[data-table=policies] tbody tr", (rows) => rows.length)).toBe(REPLAY_POLICIES.length);
      // The four cache-aware policies, four workers each.
      expect(await page.$$eval("table[data-table=predictions] tbody tr", (rows) => rows.length)).toBe(16);
      const shot = await page.screenshot({ path: join(dir, "report.png"), fullPage: true });
      expect([...shot.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
      expect(shot.length).toBeGreaterThan(50_000);
      const chart = await page.locator('svg[data-plot="ttft-cdf"]').screenshot();
      expect(chart.length).toBeGreaterThan(10_000);
      expect(network).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await ctx.close();
    }
  });
});
