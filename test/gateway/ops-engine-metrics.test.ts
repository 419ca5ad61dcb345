/**
 * @module Engine load from /metrics: the parser reads vLLM (V1 and V0 names) and SGLang gauges per dp rank; against
 * real simulated engines, load the gateway never saw (requests sent straight to one engine, as another gateway
 * replica would) makes that worker busy by its waiting queue and lifts its decode load in the cost; a worker whose
 * /metrics stops answering goes stale and counts as saturated until it answers again.
 */
import { afterEach, describe, expect, it } from "vitest";
import { parseEngineMetrics } from "../../src/gateway/engine-metrics-parse.ts";
import { ManualClock } from "../../src/routing/index.ts";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { post, startTestGateway, TOKEN, type TestGateway } from "./helpers.ts";
import { FaultProxy } from "./ops-proxy.ts";

const MODEL = "kvgate-sim";
const chat = (content: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 4, ...extra });

describe("engine /metrics parser", () => {
  it("should read vLLM and SGLang load gauges, per rank label, preferring the V1 KV-usage name", () => {
    const vllm = [
      "# HELP vllm:num_requests_running Number of requests in model execution batches.",
      "# TYPE vllm:num_requests_running gauge",
      'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
      'vllm:num_requests_running{engine="1",model_name="m"} 1.0',
      'vllm:num_requests_waiting{engine="0",model_name="m"} 7.0',
      'vllm:num_requests_waiting{engine="1",model_name="m"} 0.0',
      'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5',
      'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.9',
      'vllm:gpu_cache_usage_perc{engine="1",model_name="m"} 0.25',
      'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 100.0',
    ].join("\n");
    expect([...parseEngineMetrics(vllm)]).toEqual([[0, { running: 3, waiting: 7, kvUsage: 0.5 }], [1, { running: 1, waiting: 0, kvUsage: 0.25 }]]);
    const sglang = 'sglang:num_running_reqs{model_name="m"} 2\nsglang:num_queue_reqs{model_name="m"} 5\nsglang:token_usage{model_name="m"} 0.75\nsglang:cache_hit_rate{model_name="m"} 0.4\n';
    expect([...parseEngineMetrics(sglang)]).toEqual([[-1, { running: 2, waiting: 5, kvUsage: 0.75 }]]);
    expect(parseEngineMetrics("# nothing here\nprocess_cpu_seconds_total 12\n").size).toBe(0);
  });
});

describe("engine load from real sim /metrics", () => {
  let sims: SimServer[] = [];
  let proxy: FaultProxy | undefined;
  let gw: TestGateway | undefined;

  afterEach(async () => {
    await gw?.close();
    await proxy?.stop();
    await Promise.allSettled(sims.map((s) => s.close()));
    sims = [];
  });

  async function setup(argv: string[]): Promise<{ clock: ManualClock; tick(ms: number): Promise<void> }> {
    // A serves one sequence at a time, slowly: extra requests wait in its queue.
    sims = [
      await startSimServer({ workerId: "A", maxNumSeqs: 1, speedupRatio: 1, numGpuBlocks: 256 }),
      await startSimServer({ workerId: "B", speedupRatio: 50, numGpuBlocks: 256 }),
    ];
    proxy = new FaultProxy(sims[0]!.url);
    await proxy.listen();
    const clock = new ManualClock(1_000);
    gw = await startTestGateway([
      "--worker", `url=${proxy.url},id=A,models=${MODEL},total_kv_blocks=256`, "--worker", `url=${sims[1]!.url},id=B,models=${MODEL},total_kv_blocks=256`,
      "--tick-ms", "60000", "--health-check-ms", "0", "--engine-metrics-ms", "1000", ...argv,
    ], { now: clock.now });
    return { clock, tick: async (ms) => { clock.advance(ms); await gw!.gateway.tick(); } };
  }

  /** Requests sent straight to engine A, bypassing the gateway (another router's traffic). */
  function directLoad(n: number, maxTokens: number): AbortController {
    const abort = new AbortController();
    for (let i = 0; i < n; i++) {
      void post(`${sims[0]!.url}/v1/chat/completions`, chat(`outside load ${i} `.repeat(40), { max_tokens: maxTokens }), {}, abort.signal).then((r) => r.arrayBuffer()).catch(() => {});
    }
    return abort;
  }

  async function untilEngine(pred: () => boolean): Promise<void> {
    for (let i = 0; i < 500 && !pred(); i++) await new Promise((r) => setTimeout(r, 5));
  }

  it("should count a worker busy while its engine reports waiting requests the gateway never sent", async () => {
    const s = await setup(["--busy-engine-waiting", "0"]);
    const abort = directLoad(3, 2000);
    try {
      await untilEngine(() => sims[0]!.engine.waiting >= 2);
      await s.tick(1_000);
      const m = await (await fetch(`${gw!.url}/metrics`)).text();
      expect(m).toMatch(/kvgate_engine_requests_waiting\{dp_rank="0",worker="A"\} 2/);
      expect(m).toMatch(/kvgate_engine_requests_running\{dp_rank="0",worker="A"\} 1/);
      expect(m).toContain('kvgate_engine_scrapes_total{result="ok",worker="A"} 1');
      for (let i = 0; i < 6; i++) expect((await post(`${gw!.url}/v1/chat/completions`, chat(`q${i}`))).headers.get("x-kvgate-worker")).toBe("B");
    } finally {
      abort.abort();
    }
    // A's queue empties; the next scrape makes it a candidate again.
    await untilEngine(() => sims[0]!.engine.waiting === 0 && sims[0]!.engine.running === 0);
    await s.tick(1_000);
    const seen = new Set<string>();
    for (let i = 0; i < 12; i++) seen.add((await (await post(`${gw!.url}/v1/route`, chat(`r${i}`))).json()).worker);
    expect(seen).toEqual(new Set(["A", "B"]));
  }, 30_000);

  it("should score a worker by the engine's KV usage when it is above kvgate's own count", async () => {
    const s = await setup([]);
    const abort = directLoad(1, 2000);
    try {
      await untilEngine(() => sims[0]!.engine.running === 1 && sims[0]!.engine.cache.usage() > 0);
      await s.tick(1_000);
      // Both workers cache nothing of these prompts and kvgate booked nothing on either: only A's engine load differs.
      for (let i = 0; i < 8; i++) expect((await (await post(`${gw!.url}/v1/route`, chat(`fresh ${i}`))).json()).worker).toBe("B");
    } finally {
      abort.abort();
    }
  }, 30_000);

  it("should count a worker saturated once its /metrics has not answered for the stale limit, and not before", async () => {
    const s = await setup(["--engine-metrics-stale-after", "3"]);
    await s.tick(1_000);
    proxy!.faults.set("/metrics", 503);
    for (let i = 0; i < 3; i++) await s.tick(1_000);
    const workers = async () => (await (await fetch(`${gw!.url}/admin/workers`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()).data as { id: string; engine_metrics_stale: boolean }[];
    expect((await workers()).find((w) => w.id === "A")!.engine_metrics_stale).toBe(false);
    const seen = new Set<string>();
    for (let i = 0; i < 12; i++) seen.add((await (await post(`${gw!.url}/v1/route`, chat(`s${i}`))).json()).worker);
    expect(seen.has("A")).toBe(true);
    await s.tick(1_000);
    expect((await workers()).find((w) => w.id === "A")!.engine_metrics_stale).toBe(true);
    for (let i = 0; i < 6; i++) expect((await (await post(`${gw!.url}/v1/route`, chat(`t${i}`))).json()).worker).toBe("B");
    const m = await (await fetch(`${gw!.url}/metrics`)).text();
    expect(m).toContain('kvgate_engine_metrics_stale{worker="A"} 1');
    expect(m).toContain('kvgate_engine_scrapes_total{result="error",worker="A"} 4');
    proxy!.faults.delete("/metrics");
    await s.tick(1_000);
    expect((await workers()).find((w) => w.id === "A")!.engine_metrics_stale).toBe(false);
  }, 30_000);
});
