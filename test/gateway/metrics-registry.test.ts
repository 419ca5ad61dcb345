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

  it("should refuse a metric name twice and build exponential buckets", () => {
    const r = new MetricsRegistry();
    r.counter("x", "x");
    expect(() => r.gauge("x", "x")).toThrow();
    expect(exponentialBuckets(0.001, 2, 4)).toEqual([0.001, 0.002, 0.004, 0.008]);
  });
});
