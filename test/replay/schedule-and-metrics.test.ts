import { describe, expect, it } from "vitest";
import type { CompletionRecord } from "../../src/replay/completion-client.ts";
import { metricValue } from "../../src/replay/load-sampler.ts";
import { ProgressBar } from "../../src/replay/progress-bar.ts";
import { hitsPerWorker, predictedHitRate, type PolicyResult } from "../../src/replay/replay-results.ts";
import { engineClock, runSchedule, type ScheduleClock } from "../../src/replay/schedule.ts";
import { cdfPoints, distribution, hitRateOverTime, quantile, summarize } from "../../src/replay/stats.ts";
import { fmtMs, predictionRows, textTable } from "../../src/replay/summary-table.ts";

/** Virtual time: sleeping moves the clock (optionally overshooting, like a late timer). */
class FakeClock implements ScheduleClock {
  t = 1000;
  constructor(private readonly overshoot = 0) {}
  now = (): number => this.t;
  sleep = async (ms: number): Promise<void> => {
    this.t += ms + this.overshoot;
  };
}

describe("schedule", () => {
  const reqs = [{ id: "a", at: 500 }, { id: "b", at: 500 }, { id: "c", at: 1500 }, { id: "d", at: 4500 }];

  it("sends the first request at once and the others at (at - at0) / divisor, in order", async () => {
    const clock = new FakeClock();
    const sent: [string, number, number][] = [];
    const r = await runSchedule(reqs, { divisor: 4, clock, send: (q, planned) => sent.push([q.id, clock.now(), planned]) });
    expect(sent).toEqual([["a", 1000, 1000], ["b", 1000, 1000], ["c", 1250, 1250], ["d", 2000, 2000]]);
    expect(r).toEqual({ started: 1000, sent: 4, meanLateMs: 0, maxLateMs: 0 });
  });

  it("records how late sends were when sleeps overshoot, without drifting", async () => {
    const clock = new FakeClock(30);
    const at: number[] = [];
    const r = await runSchedule(reqs, { divisor: 1, clock, send: () => at.push(clock.now()) });
    expect(at).toEqual([1000, 1000, 2030, 5030]);
    expect(r.maxLateMs).toBe(30);
    expect(r.meanLateMs).toBe(15);
  });

  it("stops when aborted and rejects a bad divisor", async () => {
    const ac = new AbortController();
    const clock = new FakeClock();
    const sent: string[] = [];
    const r = await runSchedule(reqs, { divisor: 1, clock, signal: ac.signal, send: (q) => (sent.push(q.id), q.id === "b" && ac.abort()) });
    expect(sent).toEqual(["a", "b"]);
    expect(r.sent).toBe(2);
    await expect(runSchedule(reqs, { divisor: 0, clock, send: () => {} })).rejects.toThrow(/divisor/);
  });

  it("engine time is wall time times the engines' speed-up", async () => {
    let wall = 10;
    const slept: number[] = [];
    const c = engineClock({ now: () => wall, sleep: async (ms) => void slept.push(ms) }, 4);
    expect(c.now()).toBe(40);
    wall = 12.5;
    expect(c.now()).toBe(50);
    await c.sleep(100);
    expect(slept).toEqual([25]);
    expect(() => engineClock({ now: () => 0, sleep: async () => {} }, 0)).toThrow(/speedup/);
  });
});

const rec = (o: Partial<CompletionRecord>): CompletionRecord => ({ index: 0, sentAt: 0, status: 200, promptTokens: 100, ...o });

describe("statistics", () => {
  it("quantiles interpolate between ranks; distributions of nothing are NaN", () => {
    const s = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    expect(quantile(s, 0.5)).toBe(5.5);
    expect(quantile(s, 0.99)).toBeCloseTo(9.91, 10);
    expect(quantile(s, 0)).toBe(1);
    expect(quantile(s, 1)).toBe(10);
    expect(distribution([10, 1, 4])).toEqual({ count: 3, mean: 5, p50: 4, p90: quantile([1, 4, 10], 0.9), p99: quantile([1, 4, 10], 0.99), max: 10 });
    expect(Number.isNaN(distribution([]).mean)).toBe(true);
  });

  it("CDF points rise to 1 and are thinned to the limit, keeping the maximum", () => {
    const v = Array.from({ length: 1000 }, (_, i) => 1000 - i);
    const pts = cdfPoints(v, 100);
    expect(pts.length).toBeLessThanOrEqual(101);
    expect(pts[0]).toEqual([1, 0.001]);
    expect(pts[pts.length - 1]).toEqual([1000, 1]);
    for (let i = 1; i < pts.length; i++) expect(pts[i]![0] >= pts[i - 1]![0] && pts[i]![1] > pts[i - 1]![1]).toBe(true);
    expect(cdfPoints([])).toEqual([]);
  });

  it("hit rate over time is token-weighted per send-time bucket and skips requests without usage", () => {
    const records = [
      rec({ sentAt: 10, promptTokens: 100, cachedTokens: 0 }), rec({ sentAt: 90, promptTokens: 300, cachedTokens: 300 }),
      rec({ sentAt: 150, promptTokens: 100, cachedTokens: 50 }), rec({ sentAt: 160, error: "x" }),
    ];
    expect(hitRateOverTime(records, 100)).toEqual([{ t: 0, requests: 2, rate: 0.75 }, { t: 100, requests: 1, rate: 0.5 }]);
  });

  it("summaries count errors apart and take latencies from completed requests only", () => {
    const records = [
      rec({ sentAt: 0, ttftMs: 10, e2eMs: 100, cachedTokens: 50, completionTokens: 10 }),
      rec({ sentAt: 50, ttftMs: 30, e2eMs: 200, cachedTokens: 0, completionTokens: 10 }),
      rec({ sentAt: 60, error: "HTTP 503: busy", status: 503 }),
    ];
    const s = summarize(records, [1, 2, 3]);
    expect(s).toMatchObject({ requests: 3, completed: 2, errors: 1, promptTokens: 200, cachedTokens: 50, hitRate: 0.25, outputTokens: 20, durationMs: 250 });
    expect(s.ttftMs.mean).toBe(20);
    expect(s.itlMs.mean).toBe(2);
    expect(s.outputTokensPerSec).toBe(80);
    // Token-weighted like the actual rate: 3 blocks of 16 of a 100-token prompt, nothing of another, one without a header.
    expect(predictedHitRate([rec({ predictedBlocks: 3, promptBlocks: 6 }), rec({ predictedBlocks: 0, promptBlocks: 6 }), rec({})], 16)).toBe(0.24);
    expect(predictedHitRate([rec({ predictedBlocks: 9, promptBlocks: 6 })], 16)).toBe(1);
    expect(Number.isNaN(predictedHitRate([rec({})], 16))).toBe(true);
  });

  it("counts per worker the requests a prediction rests on and those whose engine reported under half of it", () => {
    const w = (worker: string, predictedTokens: number, cachedTokens: number) => rec({ worker, predictedBlocks: predictedTokens / 16, predictedTokens, cachedTokens });
    const hits = hitsPerWorker([
      w("w0", 80, 80), w("w0", 80, 40), w("w0", 0, 16), w("w0", 64, 0),
      w("w1", 0, 0), w("w1", 48, 32), rec({ worker: "w1", error: "HTTP 503" }),
    ], 16);
    expect(hits).toEqual([
      { worker: "w0", requests: 4, predictedHitRate: 224 / 400, hitRate: 136 / 400, predictedRequests: 3, missedRequests: 1, missedShare: 64 / 224 },
      { worker: "w1", requests: 2, predictedHitRate: 48 / 200, hitRate: 32 / 200, predictedRequests: 1, missedRequests: 0, missedShare: 0 },
    ]);
    const rows = predictionRows([{ policy: "kv_events", perWorker: hits } as PolicyResult, { policy: "round_robin", perWorker: [] } as unknown as PolicyResult]);
    expect(rows).toEqual([
      ["kv_events", "w0", "4", "56.0%", "34.0%", "3", "1", "28.6%"],
      ["kv_events", "w1", "2", "24.0%", "16.0%", "1", "0", "0.0%"],
    ]);
  });
});

describe("engine metrics, tables and progress", () => {
  it("reads a vLLM gauge by exact name, summing label sets", () => {
    const text = [
      "# HELP vllm:num_requests_running x", "# TYPE vllm:num_requests_running gauge",
      'vllm:num_requests_running{engine="0",model_name="m"} 3', 'vllm:num_requests_running{engine="1",model_name="m"} 2',
      'vllm:num_requests_running_extra{engine="0"} 100', "vllm:kv_cache_usage_perc 0.25",
    ].join("\n");
    expect(metricValue(text, "vllm:num_requests_running")).toBe(5);
    expect(metricValue(text, "vllm:kv_cache_usage_perc")).toBe(0.25);
    expect(Number.isNaN(metricValue(text, "vllm:num_requests_waiting"))).toBe(true);
  });

  it("formats milliseconds and aligns table columns", () => {
    expect([fmtMs(1.234), fmtMs(12.34), fmtMs(1234.5), fmtMs(NaN)]).toEqual(["1.23", "12.3", "1,235", "-"]);
    expect(textTable(["policy", "n"], [["rr", "5"], ["kv_events", "12"]])).toBe("policy      n\n---------  --\nrr          5\nkv_events  12\n");
  });

  it("progress redraws one line on a terminal (throttled) and prints a line per 10% elsewhere", () => {
    let t = 0;
    const tty: string[] = [], log: string[] = [];
    const a = new ProgressBar({ write: (s) => tty.push(s), tty: true, now: () => t, width: 10 });
    const b = new ProgressBar({ write: (s) => log.push(s), tty: false, now: () => t, width: 10 });
    a.start("kv_events");
    b.start("kv_events");
    for (let done = 0; done <= 100; done++) {
      t += 5;
      a.update({ sent: 100, done, errors: done > 50 ? 1 : 0, total: 100 });
      b.update({ sent: 100, done, errors: 0, total: 100 });
    }
    expect(tty.length).toBeLessThan(10);
    expect(tty.every((s) => s.startsWith("\r\x1b[2K"))).toBe(true);
    expect(tty[tty.length - 1]).toContain("[##########] 100% 100/100 in flight 0 errors 1");
    expect(log).toHaveLength(11);
    expect(log[5]).toMatch(/^kv_events\s+\[#####-----\]  50% 50\/100 in flight 50 0s\n$/);
    a.finish("done");
    expect(tty[tty.length - 1]).toBe("\r\x1b[2Kkv_events      done\n");
  });
});
