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

/** Sums of the named metrics' samples over all label sets, in one pass over the text (NaN when absent). */
export function metricValues<N extends string>(text: string, names: readonly N[]): Record<N, number> {
  const out = Object.fromEntries(names.map((n) => [n, NaN])) as Record<N, number>;
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const end = line.search(/[{ ]/);
    const name = line.slice(0, end) as N;
    if (end < 0 || !(name in out)) continue;
    const v = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (Number.isFinite(v)) out[name] = (Number.isNaN(out[name]) ? 0 : out[name]) + v;
  }
  return out;
}

/** One metric's sum over its label sets (NaN when absent). */
export function metricValue(text: string, name: string): number {
  return metricValues(text, [name])[name]!;
}

const LOAD_METRICS = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"] as const;

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
    const values = texts.map((x) => metricValues(x, LOAD_METRICS));
    const s: LoadSample = {
      t,
      running: values.map((v) => v["vllm:num_requests_running"]),
      waiting: values.map((v) => v["vllm:num_requests_waiting"]),
      kvUsage: values.map((v) => v["vllm:kv_cache_usage_perc"]),
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
