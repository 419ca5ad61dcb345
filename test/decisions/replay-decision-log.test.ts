/**
 * @module `kvgate replay --decision-log`: the replay host logs each policy's decisions to its own file (the warm-up
 * none), and `kvgate explain` replays them with 0 mismatches, re-hashing the logged tokens.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../../src/cli/main.ts";
import { policyLogPath, runReplayCommand } from "../../src/replay/replay-command.ts";
import { capturingHost } from "../replay/helpers.ts";

describe("kvgate replay --decision-log", () => {
  it("names one log per policy", () => {
    expect(policyLogPath("/x/decisions.jsonl", "kv_events")).toBe("/x/decisions.kv_events.jsonl");
    expect(policyLogPath("/x.d/decisions", "kv")).toBe("/x.d/decisions.kv");
    expect(policyLogPath(".log", "kv")).toBe(".log.kv");
  });

  it("logs every decision of the measured run, and explain replays them all", async () => {
    const host = capturingHost();
    const log = join(host.dir, "decisions.jsonl");
    const code = await runReplayCommand([
      "--requests", "200", "--workers", "3", "--speedup", "10", "--sim-speedup", "10", "--policies", "kv_events", "--warmup", "5",
      "--out", join(host.dir, "report"), "--no-progress", "--decision-log", log, "--decision-log-tokens",
    ], host);
    expect(code).toBe(0);
    const file = join(host.dir, "decisions.kv_events.jsonl");
    expect(existsSync(log)).toBe(false);
    const lines = readFileSync(file, "utf8").split("\n").filter((l) => l !== "");
    expect(lines).toHaveLength(200);
    expect(lines.every((l) => (JSON.parse(l) as { tokens?: unknown[] }).tokens !== undefined)).toBe(true);
    let out = "";
    const explained = await runCli(["explain", "--decisions", file], { stdin: () => "", write: (t) => void (out += t), readText: (p) => readFileSync(p, "utf8") });
    expect(out).toContain("200 decisions");
    expect(out).toContain("0 mismatches");
    expect(explained).toBe(0);
  }, 120_000);
});
