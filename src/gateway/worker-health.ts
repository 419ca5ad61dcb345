/**
 * @module Passive health: a worker that refuses connections is taken out of rotation (so every later request does
 * not pay a failed connect first) and probed on /health from the housekeeping tick until it answers again.
 * Only workers this module took out come back through it; an operator's drain is never undone here.
 */
import type { Fleet } from "./fleet.ts";

interface Down {
  nextProbeAt: number;
  probing: boolean;
}

export class WorkerHealthMonitor {
  readonly #down = new Map<string, Down>();

  constructor(
    private readonly fleet: Fleet,
    private readonly fetchFn: typeof fetch,
    private readonly probeMs: number,
    private readonly now: () => number,
    private readonly log: (msg: string) => void,
  ) {}

  /** A connection to the worker failed (refused, reset): mark it unhealthy when marking is enabled. */
  connectFailed(worker: string): void {
    if (this.probeMs <= 0 || this.#down.has(worker)) return;
    const w = this.fleet.get(worker);
    if (!w) return;
    try {
      this.fleet.setHealth(worker, "unhealthy");
    } catch {
      return;
    }
    this.#down.set(worker, { nextProbeAt: this.now() + this.probeMs, probing: false });
    this.log(`worker ${worker} is unreachable; out of rotation until ${w.url}/health answers`);
  }

  /** The operator set the health or removed the worker: stop managing it. */
  forget(worker: string): void {
    this.#down.delete(worker);
  }

  isDown(worker: string): boolean {
    return this.#down.has(worker);
  }

  /** Probes the due workers; resolves when those probes are done. */
  probe(): Promise<void> | undefined {
    const now = this.now();
    const due: Promise<void>[] = [];
    for (const [id, d] of this.#down) {
      if (d.probing || now < d.nextProbeAt) continue;
      d.probing = true;
      due.push(this.#probeOne(id, d));
    }
    return due.length > 0 ? Promise.all(due).then(() => undefined) : undefined;
  }

  async #probeOne(id: string, d: Down): Promise<void> {
    const w = this.fleet.get(id);
    let ok = false;
    if (w) {
      try {
        const res = await this.fetchFn(`${w.url}/health`, { signal: AbortSignal.timeout(Math.max(100, Math.min(this.probeMs, 5_000))) });
        await res.body?.cancel();
        ok = res.ok;
      } catch {
        ok = false;
      }
    }
    d.probing = false;
    d.nextProbeAt = this.now() + this.probeMs;
    if (this.#down.get(id) !== d) return;
    if (!w || !this.fleet.get(id)) {
      this.#down.delete(id);
      return;
    }
    if (ok) {
      this.#down.delete(id);
      this.fleet.setHealth(id, "healthy");
      this.log(`worker ${id} answers again; back in rotation`);
    }
  }
}
