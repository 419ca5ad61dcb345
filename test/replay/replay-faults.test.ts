/** Replay faults: parsing, when they fire, and the recovery figures set against a fault-free run. */
import { describe, expect, it } from "vitest";
import type { CompletionRecord } from "../../src/replay/completion-client.ts";
import { faultRecovery, firstFaultedRequest } from "../../src/replay/fault-recovery.ts";
import { describeFaults, engineBlocks, FaultSchedule, parseFaults, type ReplayFault } from "../../src/replay/replay-faults.ts";
import type { PolicyResult } from "../../src/replay/replay-results.ts";
import { recoveryRows, recoveryText } from "../../src/replay/summary-table.ts";

describe("replay faults", () => {
  it("parses every kind, with dashes or underscores, and says what each does", () => {
    const f = parseFaults("lose_cache:1@0.5, lose-events:0@0.25,small_cache:3@0.25", 4);
    expect(f).toEqual([
      { kind: "lose_cache", worker: 1, at: 0.5 }, { kind: "lose_events", worker: 0, at: 0.25 }, { kind: "small_cache", worker: 3, factor: 0.25 },
    ]);
    expect(describeFaults(f)).toBe("w1 loses its cache silently at 50% of the requests; w0 restarts at 25% of the requests and its KV events stop "
      + "reaching the router; w3's engine has 25% of the assumed blocks");
    expect(engineBlocks(f, 3, 4096)).toBe(1024);
    expect(engineBlocks(f, 0, 4096)).toBe(4096);
  });

  it("refuses unknown kinds, missing workers and shares outside (0, 1]", () => {
    for (const bad of ["lose_everything:1@0.5", "lose_events:4@0.5", "lose_events:1@0", "lose_events:1@1.5", "lose_events:1"]) {
      expect(() => parseFaults(bad, 4), bad).toThrow(/--faults/);
    }
  });

  it("fires the mid-run faults in order as their share of requests goes out, each once", async () => {
    const fired: ReplayFault[] = [];
    const s = new FaultSchedule(parseFaults("lose_events:2@0.5,small_cache:1@0.5,lose_cache:0@0.1", 4), async (f) => void fired.push(f));
    const counts: number[] = [];
    for (let k = 1; k <= 100; k++) counts.push((await Promise.all(s.sent(k, 100))).length);
    expect(fired.map((f) => f.kind)).toEqual(["lose_cache", "lose_events"]);
    expect(counts[9]).toBe(1);
    expect(counts[49]).toBe(1);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(2);
  });
});

/** A completed request: `prompt` tokens of which `cached` were cached. */
function rec(index: number, prompt: number, cached: number, ttftMs = 10): CompletionRecord {
  return { index, sentAt: index, status: 200, promptTokens: prompt, cachedTokens: cached, ttftMs, e2eMs: ttftMs + 5 } as CompletionRecord;
}

describe("fault recovery", () => {
  it("starts at the first request a fault can touch", () => {
    expect(firstFaultedRequest([], 100)).toBeUndefined();
    expect(firstFaultedRequest(parseFaults("lose_events:1@0.25,lose_cache:0@0.5", 4), 1000)).toBe(250);
    expect(firstFaultedRequest(parseFaults("lose_events:1@0.25,small_cache:0@0.5", 4), 1000)).toBe(0);
  });

  it("sets the fault run's hit rate after the fault against the clean run's on the same requests", () => {
    const clean = Array.from({ length: 10 }, (_, i) => rec(i, 100, 80));
    // Before request 4 the fault run matches; after it, hits halve.
    const faulted = Array.from({ length: 10 }, (_, i) => rec(i, 100, i < 4 ? 80 : 40, i < 4 ? 10 : 30));
    const r = faultRecovery(clean, faulted, 4);
    expect(r.clean.hitRateAfter).toBeCloseTo(0.8, 12);
    expect(r.faulted.hitRateAfter).toBeCloseTo(0.4, 12);
    expect(r.shareAfter).toBeCloseTo(0.5, 12);
    expect(r.share).toBeCloseTo((4 * 80 + 6 * 40) / 800, 12);
    expect(r.faulted.ttftP99Ms).toBeGreaterThan(r.clean.ttftP99Ms);
    const rows = recoveryRows([{ policy: "kv_events", faultRecovery: r } as PolicyResult, { policy: "dynamo" } as PolicyResult]);
    expect(rows).toEqual([["kv_events", "80.0%", "40.0%", "50.0%", "80.0%", "56.0%", "70.0%", "10.0", "30.0"]]);
    expect(recoveryText([{ policy: "kv_events", faultRecovery: r } as PolicyResult])).toContain("requests 4..");
    expect(recoveryText([{ policy: "dynamo" } as PolicyResult])).toBe("");
  });
});
