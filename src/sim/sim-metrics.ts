/**
 * @module The simulated engine's Prometheus metrics under vLLM V1's names and labels (`model_name`, `engine`), so
 * anything that scrapes a vLLM (kvgate's router, dashboards) reads the sim unchanged. Counters are exposed with the
 * `_total` suffix, as vLLM's prometheus_client renders them (`vllm:prefix_cache_hits_total`). Times are seconds of
 * the engine's clock (wall time on a real clock, so they shrink with the speed-up factor).
 */
import { MetricsRegistry, type Counter, type Gauge, type Histogram } from "../gateway/metrics-registry.ts";

const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560];
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const E2E_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];
const ITERATION_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];

export interface SimLoad {
  running: number;
  waiting: number;
  /** 0..1 */
  kvUsage: number;
}

export class SimMetrics {
  readonly registry = new MetricsRegistry();
  readonly labels: { model_name: string; engine: string };
  readonly #running: Gauge;
  readonly #waiting: Gauge;
  readonly #usage: Gauge;
  readonly #queries: Counter;
  readonly #hits: Counter;
  readonly #preemptions: Counter;
  readonly #promptTokens: Counter;
  readonly #generationTokens: Counter;
  readonly #success: Counter;
  readonly #ttft: Histogram;
  readonly #itl: Histogram;
  readonly #e2e: Histogram;
  readonly #iteration: Histogram;
  readonly #transfers: Counter;

  constructor(model: string, dpRank: number) {
    this.labels = { model_name: model, engine: String(dpRank) };
    const r = this.registry;
    this.#running = r.gauge("vllm:num_requests_running", "Number of requests in model execution batches.");
    this.#waiting = r.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.");
    this.#usage = r.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.");
    this.#queries = r.counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.");
    this.#hits = r.counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.");
    this.#preemptions = r.counter("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.");
    this.#promptTokens = r.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.");
    this.#generationTokens = r.counter("vllm:generation_tokens_total", "Number of generation tokens processed.");
    this.#success = r.counter("vllm:request_success_total", "Count of successfully processed requests.");
    this.#ttft = r.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS);
    this.#itl = r.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS);
    this.#e2e = r.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", E2E_BUCKETS);
    this.#iteration = r.histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_BUCKETS);
    // Not a vLLM family: what disaggregated serving did with the KV this engine kept for another one.
    this.#transfers = r.counter("kvgate_sim_kv_transfers_total", "Prefill KV kept for a decode engine (staged), read by it (taken), dropped unread after the transfer timeout (expired), or never kept because the prefill failed (failed)");
    for (const state of ["staged", "taken", "expired", "failed"]) this.#transfers.inc({ ...this.labels, state }, 0);
    // Series exist from the start at 0, as vLLM pre-creates its labelled counters.
    for (const c of [this.#queries, this.#hits, this.#preemptions, this.#promptTokens, this.#generationTokens]) c.inc(this.labels, 0);
    for (const reason of ["stop", "length", "abort"]) this.#success.inc({ ...this.labels, finished_reason: reason }, 0);
  }

  admitted(queriedTokens: number, hitTokens: number): void {
    this.#queries.inc(this.labels, queriedTokens);
    this.#hits.inc(this.labels, hitTokens);
  }

  /** Disaggregated serving: one prefill's KV was staged, taken by its decode, expired unread, or failed. */
  kvTransfer(state: "staged" | "taken" | "expired" | "failed"): void {
    this.#transfers.inc({ ...this.labels, state });
  }

  preempted(): void {
    this.#preemptions.inc(this.labels);
  }

  step(tokens: number): void {
    this.#iteration.observe(this.labels, tokens);
  }

  /** A token was generated; `sinceMs` is the time since the previous token (or, for the first, since arrival). */
  token(first: boolean, sinceMs: number, promptTokens: number): void {
    this.#generationTokens.inc(this.labels);
    if (first) {
      this.#ttft.observe(this.labels, sinceMs / 1000);
      this.#promptTokens.inc(this.labels, promptTokens);
    } else {
      this.#itl.observe(this.labels, sinceMs / 1000);
    }
  }

  finished(reason: string, e2eMs: number): void {
    this.#success.inc({ ...this.labels, finished_reason: reason });
    this.#e2e.observe(this.labels, e2eMs / 1000);
  }

  /** Counter values for tests and reports (without labels). */
  counts(): { queries: number; hits: number; preemptions: number; promptTokens: number; generationTokens: number; ttftCount: number } {
    return {
      queries: this.#queries.get(this.labels),
      hits: this.#hits.get(this.labels),
      preemptions: this.#preemptions.get(this.labels),
      promptTokens: this.#promptTokens.get(this.labels),
      generationTokens: this.#generationTokens.get(this.labels),
      ttftCount: this.#ttft.count(this.labels),
    };
  }

  /** Prometheus exposition text with the gauges set from the current load. */
  render(load: SimLoad): string {
    this.#running.set(this.labels, load.running);
    this.#waiting.set(this.labels, load.waiting);
    this.#usage.set(this.labels, load.kvUsage);
    return this.registry.render();
  }
}
