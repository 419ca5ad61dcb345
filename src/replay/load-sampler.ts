/**
 * @module Per-worker load over time, read the way an operator would: each engine's Prometheus `/metrics` (vLLM names:
 * running and waiting requests, KV-cache usage), scraped at a fixed interval. Works the same for simulated engines
 * and real vLLM workers, in this process or elsewhere.
 */
import type { ScheduleClock } from "./schedule.ts";

export interface LoadSample {
  /** Clock ms since the run started. */
  t: number;
  /** One entry per worker, in the sampler's worker order; NaN when a scrape failed. */
  running: number[];
  waiting: number[];
  kvUsage: number[];
}

/** Sum of a metric's samples over all label sets (NaN when absent). */
export function metricValue(text: string, name: string): number {
  let sum = NaN;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    const v = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (Number.isFinite(v)) sum = (Number.isNaN(sum) ? 0 : sum) + v;
  }
  return sum;
}

export interface SamplerOptions {
  fetch: typeof fetch;
  clock: ScheduleClock;
  /** Clock ms between scrapes. */
  intervalMs: number;
  runStart: number;
}

export class LoadSampler {
  readonly samples: LoadSample[] = [];
  #stopped = false;
  #loop: Promise<void> | undefined;

  constructor(readonly workerUrls: readonly string[], private readonly o: SamplerOptions) {}

  start(): void {
    this.#loop ??= (async () => {
      while (!this.#stopped) {
        await this.sampleOnce();
        if (!this.#stopped) await this.o.clock.sleep(this.o.intervalMs);
      }
    })();
  }

  async sampleOnce(): Promise<LoadSample> {
    const t = this.o.clock.now() - this.o.runStart;
    const texts = await Promise.all(this.workerUrls.map((u) => this.o.fetch(`${u}/metrics`).then((r) => r.text(), () => "")));
    const s: LoadSample = {
      t,
      running: texts.map((x) => metricValue(x, "vllm:num_requests_running")),
      waiting: texts.map((x) => metricValue(x, "vllm:num_requests_waiting")),
      kvUsage: texts.map((x) => metricValue(x, "vllm:kv_cache_usage_perc")),
    };
    this.samples.push(s);
    return s;
  }

  /** Takes a last sample and stops. */
  async stop(): Promise<LoadSample[]> {
    this.#stopped = true;
    await this.#loop;
    await this.sampleOnce();
    return this.samples;
  }
}
