/**
 * @module Scrapes each worker's /metrics every `intervalMs` (on the injected clock, from the housekeeping tick) and
 * hands the engine's own view of its load to the router: requests running and waiting and KV-cache usage per dp rank.
 * The router's estimate counts only the requests this gateway sent; the engine's covers every client (other gateway
 * replicas included). A worker with no successful scrape for `staleAfter` intervals has stale metrics and counts as
 * saturated (busy) until a scrape succeeds again — a router must not trust load it cannot see.
 */
import type { Router } from "../routing/index.ts";
import type { Fleet, FleetWorker } from "./fleet.ts";
import { parseEngineMetrics, type EngineSample, type EngineSamples } from "./engine-metrics-parse.ts";
import type { MetricsRegistry } from "./metrics-registry.ts";

export interface EngineMetricsOptions {
  /** Scrape period; 0 disables scraping. */
  intervalMs: number;
  /** Intervals without a successful scrape after which a worker's metrics are stale. */
  staleAfter: number;
  timeoutMs: number;
}

interface Scraped {
  nextAt: number;
  lastOkAt: number;
  scraping: boolean;
  stale: boolean;
  /** Last sample per rank. */
  last: Map<number, EngineSample>;
}

export class EngineMetricsScraper {
  readonly #workers = new Map<string, Scraped>();
  readonly #m;

  constructor(
    private readonly fleet: Fleet,
    private readonly router: Router,
    private readonly fetchFn: typeof fetch,
    readonly o: EngineMetricsOptions,
    private readonly now: () => number,
    private readonly log: (msg: string) => void,
    registry: MetricsRegistry,
  ) {
    this.#m = {
      scrapes: registry.counter("kvgate_engine_scrapes_total", "Scrapes of workers' /metrics, by worker and result (ok, error, no_metrics)"),
      running: registry.gauge("kvgate_engine_requests_running", "Requests running as the engine reports them, per worker rank"),
      waiting: registry.gauge("kvgate_engine_requests_waiting", "Requests waiting as the engine reports them, per worker rank"),
      usage: registry.gauge("kvgate_engine_kv_cache_usage", "KV-cache usage (0..1) as the engine reports it, per worker rank"),
      stale: registry.gauge("kvgate_engine_metrics_stale", "1 while a worker's engine metrics are stale (it counts as saturated)"),
    };
  }

  get enabled(): boolean {
    return this.o.intervalMs > 0;
  }

  track(worker: string): void {
    if (!this.enabled || this.#workers.has(worker)) return;
    const now = this.now();
    this.#workers.set(worker, { nextAt: now, lastOkAt: now, scraping: false, stale: false, last: new Map() });
    this.#m.stale.set({ worker }, 0);
  }

  forget(worker: string): void {
    const s = this.#workers.get(worker);
    if (!s) return;
    this.#workers.delete(worker);
    this.#m.stale.delete({ worker });
    for (const r of s.last.keys()) for (const g of [this.#m.running, this.#m.waiting, this.#m.usage]) g.delete({ worker, dp_rank: r });
  }

  isStale(worker: string): boolean {
    return this.#workers.get(worker)?.stale ?? false;
  }

  /** The last sample scraped for a rank (undefined before the first, or with scraping off), for /v1/stats. */
  lastSample(worker: string, dpRank: number): Readonly<EngineSample> | undefined {
    return this.#workers.get(worker)?.last.get(dpRank);
  }

  /** Marks workers stale whose last good scrape is too old, then scrapes the due ones; resolves when done. */
  scrape(): Promise<void> | undefined {
    if (!this.enabled) return undefined;
    for (const w of this.fleet.list()) this.track(w.id);
    for (const id of [...this.#workers.keys()]) if (!this.fleet.get(id)) this.forget(id);
    const now = this.now();
    const due: Promise<void>[] = [];
    for (const [id, s] of this.#workers) {
      if (!s.stale && now - s.lastOkAt > this.o.staleAfter * this.o.intervalMs) this.#setStale(id, s, true);
      if (s.scraping || now < s.nextAt) continue;
      s.scraping = true;
      s.nextAt = now + this.o.intervalMs;
      due.push(this.#scrapeOne(id, s));
    }
    return due.length > 0 ? Promise.all(due).then(() => undefined) : undefined;
  }

  async #scrapeOne(id: string, s: Scraped): Promise<void> {
    const w = this.fleet.get(id);
    let samples: EngineSamples | undefined;
    try {
      if (!w) return;
      const res = await this.fetchFn(`${w.url}/metrics`, { signal: AbortSignal.timeout(this.o.timeoutMs) });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      samples = parseEngineMetrics(await res.text());
    } catch {
      samples = undefined;
    } finally {
      s.scraping = false;
    }
    if (!w || this.#workers.get(id) !== s) return;
    if (!samples || samples.size === 0) {
      // No vLLM or SGLang load gauges (SGLang needs --enable-metrics): as good as no answer.
      this.#m.scrapes.inc({ worker: id, result: samples ? "no_metrics" : "error" });
      return;
    }
    this.#m.scrapes.inc({ worker: id, result: "ok" });
    s.lastOkAt = this.now();
    for (const [rank, sample] of this.#byRank(w, samples)) s.last.set(rank, sample);
    if (s.stale) this.#setStale(id, s, false);
    else this.#publish(id, s);
  }

  /** Samples keyed by the worker's ranks: an unlabelled series stands for every rank; a label is a global or local rank. */
  #byRank(w: FleetWorker, samples: EngineSamples): Map<number, EngineSample> {
    const out = new Map<number, EngineSample>();
    const all = samples.get(-1);
    if (all) for (let r = w.dpStart; r < w.dpStart + w.dpSize; r++) out.set(r, all);
    for (const [label, sample] of samples) {
      if (label < 0) continue;
      const rank = label >= w.dpStart && label < w.dpStart + w.dpSize ? label : label < w.dpSize ? w.dpStart + label : -1;
      if (rank >= 0) out.set(rank, sample);
    }
    return out;
  }

  #setStale(id: string, s: Scraped, stale: boolean): void {
    s.stale = stale;
    this.#m.stale.set({ worker: id }, stale ? 1 : 0);
    this.log(stale
      ? `worker ${id}: no engine metrics for ${this.o.staleAfter} scrape intervals; it counts as saturated until /metrics answers`
      : `worker ${id}: engine metrics are fresh again`);
    if (stale) {
      const w = this.fleet.get(id);
      // Ranks never scraped get a stale report too, so they count as saturated as well.
      if (w) for (let r = w.dpStart; r < w.dpStart + w.dpSize; r++) if (!s.last.has(r)) s.last.set(r, { running: 0, waiting: 0 });
    }
    this.#publish(id, s);
  }

  #publish(id: string, s: Scraped): void {
    for (const [rank, x] of s.last) {
      this.router.setEngineLoad(id, rank, { running: x.running, waiting: x.waiting, kvUsage: x.kvUsage, stale: s.stale });
      const l = { worker: id, dp_rank: rank };
      this.#m.running.set(l, x.running);
      this.#m.waiting.set(l, x.waiting);
      if (x.kvUsage !== undefined) this.#m.usage.set(l, x.kvUsage);
    }
  }
}
