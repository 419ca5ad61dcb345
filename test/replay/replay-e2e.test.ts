import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runReplayCommand } from "../../src/replay/replay-command.ts";
import type { ReplayResults } from "../../src/replay/replay-results.ts";
import { completionBody } from "../../src/replay/completion-client.ts";
import type { EncodedKvBatch } from "../../src/sim/kv-event-sink.ts";
import { startThreadFleet } from "../../src/adapter/node/replay-fleet.ts";
import { capturingHost, chatTrace } from "./helpers.ts";

describe("kvgate replay end to end (2 simulated engines, real HTTP through the gateway, streaming)", () => {
  it("KV-aware routing gets more cached tokens than round-robin on a multi-turn trace, and the report is written", async () => {
    const host = capturingHost();
    const trace = join(host.dir, "chat.jsonl");
    writeFileSync(trace, chatTrace());
    const code = await runReplayCommand([
      "--trace", trace, "--workers", "2", "--speedup", "1", "--sim-speedup", "20", "--policies", "round_robin,kv_events,kv_approx",
      "--out", join(host.dir, "report"), "--no-progress", "--warmup", "0",
    ], host);
    expect(host.err.join("")).not.toMatch(/failed|error/i);
    expect(code).toBe(0);
    const doc = JSON.parse(host.read("report.json")) as ReplayResults;
    expect(doc.policies.map((p) => p.policy)).toEqual(["round_robin", "kv_approx", "kv_events"]);
    const by = Object.fromEntries(doc.policies.map((p) => [p.policy, p]));
    for (const p of doc.policies) {
      expect(p.summary).toMatchObject({ requests: 12, completed: 12, errors: 0 });
      for (const r of p.requests) {
        expect(r.ttftMs).toBeGreaterThan(0);
        expect(r.e2eMs).toBeGreaterThanOrEqual(r.ttftMs!);
        expect(r.completionTokens).toBe(4);
        expect(r.worker).toMatch(/^w[01]$/);
      }
      expect(p.load.workers).toEqual(["w0", "w1"]);
      expect(p.load.samples.length).toBeGreaterThan(2);
    }
    expect(new Set(by.round_robin!.requests.map((r) => r.worker)).size).toBe(2);
    // Round-robin splits every conversation over both workers; the KV policies keep each on the worker holding it
    // (with no load between the sequential requests, even all on one: the shared system prompt attracts them).
    const rr = by.round_robin!.summary.cachedTokens, kv = by.kv_events!.summary.cachedTokens, approx = by.kv_approx!.summary.cachedTokens;
    expect(kv).toBeGreaterThan(rr);
    expect(approx).toBeGreaterThan(rr);
    expect(by.kv_events!.summary.hitRate).toBeGreaterThan(0.6);
    // With events the router knows exactly what is cached: its prediction equals the engines' report.
    expect(Math.abs(by.kv_events!.predictedHitRate - by.kv_events!.summary.hitRate)).toBeLessThan(0.005);
    expect(by.kv_events!.events).toMatchObject({ refused: 0, gaps: 0 });
    expect(by.kv_events!.events!.batches).toBeGreaterThan(0);
    // Nothing is evicted in this small run, so the pooled cache hits every prefix block any engine could.
    expect(doc.ceiling.hitRate).toBeLessThanOrEqual(1);
    for (const p of doc.policies) expect(p.summary.hitRate).toBeLessThanOrEqual(doc.ceiling.hitRate + 1e-9);
    const table = host.out.join("");
    expect(table).toContain(`ceiling (one LRU cache of all ${doc.ceiling.blocks} blocks)`);
    expect(table).toMatch(/^round_robin\s+12\s+0\s/m);
    expect(table).toMatch(/^kv_events\s+12\s+0\s/m);
    expect(table).toContain("Mooncake FAST'25");
    const html = host.read("report.html");
    for (const id of ["ttft-cdf", "hit-rate", "load-round_robin", "load-kv_events"]) expect(html).toContain(`data-plot="${id}"`);
  });

  it("with faults, runs each policy without them too and reports how far it recovered", async () => {
    const host = capturingHost();
    const trace = join(host.dir, "chat.jsonl");
    writeFileSync(trace, chatTrace());
    const code = await runReplayCommand([
      "--trace", trace, "--workers", "2", "--speedup", "1", "--sim-speedup", "20", "--policies", "dynamo,kv_events",
      "--faults", "lose_events:0@0.25,lose_events:1@0.25,small_cache:0@0.5", "--out", join(host.dir, "faults"), "--no-progress", "--warmup", "0",
    ], host);
    expect(code).toBe(0);
    const doc = JSON.parse(host.read("faults.json")) as ReplayResults;
    // The policies ran on the fleet as the faults left it (w0 with half its blocks): the ceiling is that fleet's.
    expect(doc.ceiling.blocks).toBe(2048 + 4096);
    expect(doc.cleanCeiling?.blocks).toBe(2 * 4096);
    for (const p of doc.policies) {
      const r = p.faultRecovery!;
      // small_cache holds from the first request, so the figures "after the fault" cover the whole run.
      expect(r.from).toBe(0);
      expect(r.clean.hitRate).toBeGreaterThan(0);
      expect(r.share).toBeCloseTo(p.summary.hitRate / r.clean.hitRate, 9);
      expect(p.log.some((l) => l.startsWith("fault: w1 restarted"))).toBe(true);
    }
    // The restarted engines' batches (whichever of them served requests after the fault) never reached the gateway.
    expect(doc.policies.find((p) => p.policy === "kv_events")!.events!.dropped).toBeGreaterThan(0);
    const out = host.out.join("");
    expect(out).toContain("fault recovery: each policy also ran without the faults");
    expect(out).toMatch(/^kv_events(\s+\S+){8}$/m);
    expect(out).toContain("(without the faults, 8192 blocks:");
    expect(host.read("faults.html")).toContain('data-table="recovery"');
  });

  it("the threaded fleet serves completions and hands over each engine's KV-event batches in order", async () => {
    const batches: EncodedKvBatch[] = [];
    const fleet = await startThreadFleet({ engines: [{ workerId: "t0", blockSize: 16, numGpuBlocks: 64 }], onBatch: (b) => batches.push(b) });
    try {
      const res = await fetch(`${fleet.urls[0]}/v1/completions`, {
        method: "POST", headers: { "content-type": "application/json" }, body: completionBody("kvgate-sim", Uint32Array.from({ length: 40 }, (_, i) => i + 1), 2),
      });
      const text = await res.text();
      expect(res.status).toBe(200);
      expect(text).toContain('"cached_tokens":0');
      expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
      for (let i = 0; i < 50 && batches.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(batches.length).toBeGreaterThan(0);
      expect(batches.map((b) => b.seq)).toEqual(batches.map((_, i) => i));
      expect(batches[0]).toMatchObject({ workerId: "t0", dpRank: 0 });
    } finally {
      await fleet.close();
    }
  });

  it("prints usage for --help and rejects bad options", async () => {
    const host = capturingHost();
    expect(await runReplayCommand(["--help"], host)).toBe(0);
    expect(host.out.join("")).toContain("usage: kvgate replay");
    await expect(runReplayCommand(["--policies", "fastest"], host)).rejects.toThrow(/unknown policy/);
    await expect(runReplayCommand(["--slice", "1:2"], host)).rejects.toThrow(/need --trace/);
    await expect(runReplayCommand(["--trace", join(host.dir, "missing.jsonl")], host)).rejects.toThrow(/no such file/);
  });
});
