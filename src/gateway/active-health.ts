/**
 * @module Health checks of the workers' GET /health, on the injected clock. Active: every worker is probed every
 * `intervalMs`; `failThreshold` failures in a row make it failing, `successThreshold` successes in a row make it
 * healthy again. Passive: a refused connection makes a worker failing at once, and a failing worker is probed every
 * `probeMs` (also when active checks are off) until it recovers. Pure bookkeeping plus the probe; worker-health.ts
 * turns "failing" into the router's health.
 */

export interface HealthCheckOptions {
  /** Probe every worker this often; 0 = only failing workers are probed. */
  intervalMs: number;
  /** Probe period of a failing worker when active checks are off; 0 with intervalMs 0 = health checks off. */
  probeMs: number;
  timeoutMs: number;
  failThreshold: number;
  successThreshold: number;
}

interface Check {
  fails: number;
  oks: number;
  failing: boolean;
  nextAt: number;
  probing: boolean;
}

export type ProbeResult = "ok" | "fail";

export class HealthChecks {
  readonly #checks = new Map<string, Check>();

  constructor(readonly o: HealthCheckOptions, private readonly now: () => number, private readonly fetchFn: typeof fetch) {}

  get enabled(): boolean {
    return this.o.intervalMs > 0 || this.o.probeMs > 0;
  }

  /** Starts checking a worker (active mode probes it at the next tick). */
  track(worker: string): void {
    if (!this.#checks.has(worker)) this.#checks.set(worker, { fails: 0, oks: 0, failing: false, nextAt: this.now(), probing: false });
  }

  forget(worker: string): void {
    this.#checks.delete(worker);
  }

  isFailing(worker: string): boolean {
    return this.#checks.get(worker)?.failing ?? false;
  }

  /** A connection to the worker was refused or reset: failing now, probed until it recovers. */
  markUnreachable(worker: string): boolean {
    if (!this.enabled) return false;
    this.track(worker);
    const c = this.#checks.get(worker)!;
    c.fails = Math.max(c.fails, this.o.failThreshold);
    c.oks = 0;
    const changed = !c.failing;
    c.failing = true;
    c.nextAt = Math.min(c.nextAt, this.now() + this.#period(c));
    return changed;
  }

  /** Workers whose probe is due now (marked as probing). */
  due(): string[] {
    const now = this.now();
    const out: string[] = [];
    for (const [id, c] of this.#checks) {
      if (c.probing || now < c.nextAt) continue;
      if (this.o.intervalMs <= 0 && !c.failing) continue;
      c.probing = true;
      out.push(id);
    }
    return out;
  }

  /** GET url/health; records the outcome and returns it, with whether the worker's failing state changed. */
  async probe(worker: string, url: string): Promise<{ result: ProbeResult; changed: boolean }> {
    let ok = false;
    try {
      const res = await this.fetchFn(`${url}/health`, { signal: AbortSignal.timeout(this.o.timeoutMs) });
      await res.body?.cancel();
      ok = res.ok;
    } catch {
      ok = false;
    }
    const c = this.#checks.get(worker);
    if (!c) return { result: ok ? "ok" : "fail", changed: false };
    c.probing = false;
    const was = c.failing;
    if (ok) {
      c.fails = 0;
      if (c.failing && ++c.oks >= this.o.successThreshold) c.failing = false;
    } else {
      c.oks = 0;
      if (++c.fails >= this.o.failThreshold) c.failing = true;
    }
    c.nextAt = this.now() + this.#period(c);
    return { result: ok ? "ok" : "fail", changed: was !== c.failing };
  }

  #period(c: Check): number {
    return this.o.intervalMs > 0 ? (c.failing && this.o.probeMs > 0 ? Math.min(this.o.intervalMs, this.o.probeMs) : this.o.intervalMs) : this.o.probeMs;
  }
}
