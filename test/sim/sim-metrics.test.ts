import { describe, it, expect } from "vitest";
import { prefillMs } from "../../src/sim/perf-model.ts";
import { drain, range, simFixture } from "./helpers.ts";

const L = 'engine="0",model_name="kvgate-sim"';

/** The value of one series in Prometheus text. */
function value(text: string, series: string): number {
  const line = text.split("\n").find((l) => l.startsWith(series + " "));
  if (line === undefined) throw new Error(`no series ${series} in\n${text}`);
  return Number(line.slice(series.length + 1));
}

describe("SimEngine metrics (vLLM names)", () => {
  it("should show running, waiting and KV usage gauges while requests run", async () => {
    const f = await simFixture({ numGpuBlocks: 40, maxNumSeqs: 2 });
    const hs = [0, 1, 2].map((k) => f.engine.submit({ prompt: range(k * 1000, 40), maxTokens: 4 }));
    f.clock.advance(0);
    const during = f.engine.renderMetrics();
    expect(value(during, `vllm:num_requests_running{${L}}`)).toBe(2);
    expect(value(during, `vllm:num_requests_waiting{${L}}`)).toBe(1);
    expect(value(during, `vllm:kv_cache_usage_perc{${L}}`)).toBe(6 / 40);
    await drain(f, hs);
    const after = f.engine.renderMetrics();
    expect(value(after, `vllm:num_requests_running{${L}}`)).toBe(0);
    expect(value(after, `vllm:num_requests_waiting{${L}}`)).toBe(0);
    expect(value(after, `vllm:kv_cache_usage_perc{${L}}`)).toBe(0);
  });

  it("should count prefix-cache queries and hits in tokens, tokens, successes and latencies", async () => {
    const f = await simFixture({ numGpuBlocks: 64 });
    const runs = [range(0, 70), range(0, 70), [...range(0, 40), ...range(500, 30)]];
    const results = [];
    for (const prompt of runs) results.push(...(await drain(f, [f.engine.submit({ prompt, maxTokens: 3 })])));
    expect(results.map((r) => r.cachedTokens)).toEqual([0, 64, 32]);
    const text = f.engine.renderMetrics();
    expect(value(text, `vllm:prefix_cache_queries_total{${L}}`)).toBe(210);
    expect(value(text, `vllm:prefix_cache_hits_total{${L}}`)).toBe(96);
    expect(value(text, `vllm:prompt_tokens_total{${L}}`)).toBe(210);
    expect(value(text, `vllm:generation_tokens_total{${L}}`)).toBe(9);
    expect(value(text, `vllm:request_success_total{engine="0",finished_reason="length",model_name="kvgate-sim"}`)).toBe(3);
    expect(value(text, `vllm:time_to_first_token_seconds_count{${L}}`)).toBe(3);
    expect(value(text, `vllm:time_to_first_token_seconds_sum{${L}}`)).toBeCloseTo((prefillMs(70) + prefillMs(6) + prefillMs(38)) / 1000, 9);
    expect(value(text, `vllm:inter_token_latency_seconds_count{${L}}`)).toBe(6);
    expect(value(text, `vllm:e2e_request_latency_seconds_count{${L}}`)).toBe(3);
    expect(value(text, `vllm:iteration_tokens_total_sum{${L}}`)).toBe(70 + 6 + 38 + 6);
    expect(value(text, `vllm:num_preemptions_total{${L}}`)).toBe(0);
    expect(text).toContain("# TYPE vllm:prefix_cache_hits_total counter");
    expect(text).toContain("# TYPE vllm:time_to_first_token_seconds histogram");
  });
});
