/** StatsTimeline and LatencySketch on a hand-moved clock: interval buckets, empty intervals, the window, quantiles, ingest rates. */
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/routing/index.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";
import { LatencySketch } from "../../src/gateway/latency-sketch.ts";
import { StatsTimeline } from "../../src/gateway/stats-timeline.ts";

describe("LatencySketch", () => {
  it("gives p50 and p99 within 5% of the exact nearest-rank quantiles of seeded samples", () => {
    const rnd = seededRandom(7);
    const xs: number[] = [];
    const sk = new LatencySketch();
    for (let i = 0; i < 5_000; i++) {
      // Log-normal-ish latencies from 0.5 ms to a few seconds.
      const v = Math.exp(rnd.next() * 9 - 0.7);
      xs.push(v);
      sk.observe(v);
    }
    xs.sort((a, b) => a - b);
    for (const q of [0.5, 0.99]) {
      const exact = xs[Math.ceil(q * xs.length) - 1]!;
      expect(Math.abs(sk.quantile(q)! - exact) / exact).toBeLessThan(0.05);
    }
    expect(sk.count).toBe(5_000);
  });

  it("answers undefined when empty, ignores non-finite values and never exceeds the largest sample", () => {
    const sk = new LatencySketch();
    expect(sk.quantile(0.5)).toBeUndefined();
    sk.observe(Number.NaN);
    sk.observe(-1);
    expect(sk.count).toBe(0);
    sk.observe(12.5);
    expect(sk.quantile(0.99)).toBeLessThanOrEqual(12.5);
    expect(sk.quantile(0.99)).toBeGreaterThan(11.5);
  });
});

describe("StatsTimeline", () => {
  it("puts observations in the interval of the clock and computes token-weighted hit rates and latency quantiles", () => {
    const clock = new ManualClock(10_500);
    const tl = new StatsTimeline(clock.now, { intervalMs: 1_000, buckets: 10 });
    tl.routed(100, 50, 0);
    tl.routed(300, 250, 2);
    tl.reported(400, 100);
    tl.firstToken(20);
    tl.answered(200);
    tl.answered(429);
    tl.answered(503);
    clock.advance(1_000);
    tl.firstToken(40);
    const s = tl.series();
    expect(s.t).toEqual([10_000, 11_000]);
    expect(s.requests).toEqual([2, 0]);
    expect(s.predicted_hit_rate).toEqual([0.75, null]);
    expect(s.reported_hit_rate).toEqual([0.25, null]);
    expect(s.queue_depth_max).toEqual([2, 0]);
    expect(s.rejected).toEqual([1, 0]);
    expect(s.errors).toEqual([1, 0]);
    expect(s.ttft_p50_ms[0]).toBeCloseTo(20, -0.5);
    expect(s.ttft_p50_ms[1]).toBeCloseTo(40, -0.5);
    expect(s.itl_p50_ms).toEqual([null, null]);
  });

  it("opens empty intervals for quiet time, keeps only the window, and filters by since", () => {
    const clock = new ManualClock(0);
    const tl = new StatsTimeline(clock.now, { intervalMs: 1_000, buckets: 5 });
    tl.routed(10, 0, 0);
    clock.advance(3_000);
    tl.routed(10, 10, 0);
    expect(tl.series().t).toEqual([0, 1_000, 2_000, 3_000]);
    expect(tl.series().requests).toEqual([1, 0, 0, 1]);
    clock.advance(3_000);
    expect(tl.series().t).toEqual([2_000, 3_000, 4_000, 5_000, 6_000]);
    expect(tl.series(5_000).t).toEqual([5_000, 6_000]);
    // Quiet for longer than the window: only the current interval is left.
    clock.advance(60_000);
    expect(tl.series().t).toEqual([66_000]);
  });

  it("spreads ingest growth over the intervals since the last sample and counts a reset counter from zero", () => {
    const clock = new ManualClock(0);
    const tl = new StatsTimeline(clock.now, { intervalMs: 1_000, buckets: 10 });
    tl.sampleIngest({ events: 100, gaps: 0, coldStreams: 0 });
    clock.advance(4_000);
    tl.sampleIngest({ events: 500, gaps: 2, coldStreams: 1 });
    const s = tl.series();
    expect(s.t).toEqual([0, 1_000, 2_000, 3_000, 4_000]);
    expect(s.kv_events_per_s).toEqual([100, 100, 100, 100, 0]);
    expect(s.kv_gaps).toEqual([0.5, 0.5, 0.5, 0.5, 0]);
    expect(s.cold_streams).toEqual([0, 0, 0, 0, 1]);
    clock.advance(500);
    tl.sampleIngest({ events: 30, gaps: 0, coldStreams: 0 });
    expect(tl.series(4_000).kv_events_per_s).toEqual([30]);
  });

  it("refuses a zero interval or an empty ring", () => {
    expect(() => new StatsTimeline(() => 0, { intervalMs: 0, buckets: 3 })).toThrow(RangeError);
    expect(() => new StatsTimeline(() => 0, { intervalMs: 1_000, buckets: 0 })).toThrow(RangeError);
  });
});
