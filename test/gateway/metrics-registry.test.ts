import { describe, it, expect } from "vitest";
import { MetricsRegistry, exponentialBuckets } from "../../src/gateway/metrics-registry.ts";

describe("MetricsRegistry", () => {
  it("should render counters, gauges and cumulative histograms in Prometheus text format", () => {
    const r = new MetricsRegistry();
    const c = r.counter("kvgate_requests_total", "Requests.");
    const g = r.gauge("kvgate_worker_active_blocks", "Active blocks.");
    const h = r.histogram("kvgate_ttft_seconds", "TTFT.", [0.1, 1]);
    c.inc({ model: "m", status: "200" });
    c.inc({ status: "200", model: "m" }, 2);
    g.set({ worker: 'a"b' }, 7);
    h.observe(undefined, 0.05);
    h.observe(undefined, 0.5);
    h.observe(undefined, 5);
    const text = r.render();
    expect(text).toContain("# TYPE kvgate_requests_total counter");
    expect(text).toContain('kvgate_requests_total{model="m",status="200"} 3');
    expect(text).toContain('kvgate_worker_active_blocks{worker="a\\"b"} 7');
    expect(text).toContain('kvgate_ttft_seconds_bucket{le="0.1"} 1');
    expect(text).toContain('kvgate_ttft_seconds_bucket{le="1"} 2');
    expect(text).toContain('kvgate_ttft_seconds_bucket{le="+Inf"} 3');
    expect(text).toContain("kvgate_ttft_seconds_sum 5.55");
    expect(text).toContain("kvgate_ttft_seconds_count 3");
  });

  it("should keep label sets apart whatever their values hold, escape them, and stay exact past the formatted-label cache", () => {
    const r = new MetricsRegistry();
    const c = r.counter("kvgate_odd_total", "Odd labels.");
    // Raw forms a naive concatenation would confuse: values holding what looks like another key and value.
    c.inc({ a: "x", b: "y" });
    c.inc({ a: "x1:b1:y" });
    c.inc({ a: "1:x", b: "" });
    c.inc({ a: 'back\\slash "q"\nline' });
    expect(c.get({ a: "x", b: "y" })).toBe(1);
    expect(c.get({ b: "y", a: "x" })).toBe(1);
    expect(c.get({ a: "x1:b1:y" })).toBe(1);
    expect(c.get({ a: "1:x", b: "" })).toBe(1);
    const text = r.render();
    expect(text).toContain('kvgate_odd_total{a="back\\\\slash \\"q\\"\\nline"} 1');
    // More distinct label sets than the cache keeps, then the first ones again: counts stay per set.
    for (let round = 0; round < 2; round++) for (let i = 0; i < 5000; i++) c.inc({ worker: `w${i}`, rank: i % 7 });
    for (const i of [0, 1, 4095, 4096, 4999]) expect(c.get({ rank: i % 7, worker: `w${i}` })).toBe(2);
    // A label set too long to be kept is formatted every time, the same way.
    const long = "v".repeat(400);
    c.inc({ long });
    c.inc({ long });
    expect(c.get({ long })).toBe(2);
  });

  it("should refuse a metric name twice and build exponential buckets", () => {
    const r = new MetricsRegistry();
    r.counter("x", "x");
    expect(() => r.gauge("x", "x")).toThrow();
    expect(exponentialBuckets(0.001, 2, 4)).toEqual([0.001, 0.002, 0.004, 0.008]);
  });
});
