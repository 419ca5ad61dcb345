/**
 * @module Whether each worker takes new requests, from three automatic signals — health checks (active probes of
 * /health, and passive: a refused connection), the circuit breaker over upstream errors, and its half-open trial —
 * applied to the router as "unhealthy" (drained: no new requests, in-flight streams run to their end) and back to
 * "healthy" when all clear. An operator's setting through the admin API wins: a worker the operator drained or
 * marked is never brought back here, and one the operator re-enabled starts with a clean slate. All counted in
 * /metrics.
 */
import { HealthChecks, type HealthCheckOptions } from "./active-health.ts";
import { CircuitBreaker, type CircuitOptions, type CircuitState } from "./circuit-breaker.ts";
import type { Fleet } from "./fleet.ts";
import type { MetricsRegistry } from "./metrics-registry.ts";
import type { FailureKind } from "./upstream.ts";

export interface WorkerHealthOptions extends HealthCheckOptions {
  circuit: CircuitOptions;
}

const STATE_VALUE: Record<CircuitState, number> = { closed: 0, open: 1, half_open: 2 };
type Reason = "health_check" | "circuit_open" | "circuit_trial";

export class WorkerHealthMonitor {
  readonly checks: HealthChecks;
  readonly #breakers = new Map<string, CircuitBreaker>();
  /** Workers whose health the operator set to draining/unhealthy: left alone. */
  readonly #held = new Set<string>();
  /** Workers this monitor took out of rotation. */
  readonly #out = new Set<string>();
  readonly #tracked = new Set<string>();
  readonly #m;

  constructor(
    private readonly fleet: Fleet,
    fetchFn: typeof fetch,
    private readonly o: WorkerHealthOptions,
    private readonly now: () => number,
    private readonly log: (msg: string) => void,
    registry: MetricsRegistry,
  ) {
    this.checks = new HealthChecks(o, now, fetchFn);
    this.#m = {
      checks: registry.counter("kvgate_worker_health_checks_total", "Health probes of workers' /health, by result"),
      out: registry.gauge("kvgate_worker_out_of_rotation", "1 while kvgate keeps the worker from new requests, by reason (health_check, circuit_open, circuit_trial)"),
      circuit: registry.gauge("kvgate_circuit_breaker_state", "Per worker: 0 closed, 1 open, 2 half-open"),
      transitions: registry.counter("kvgate_circuit_breaker_transitions_total", "Circuit breaker state changes, by worker and new state"),
      failures: registry.counter("kvgate_worker_attempt_failures_total", "Failed upstream attempts counted by the circuit breaker, by worker"),
    };
  }

  /** Starts watching a worker (active health checks, circuit breaker); workers of the fleet are picked up by themselves. */
  track(worker: string): void {
    this.#tracked.add(worker);
    if (this.o.intervalMs > 0) this.checks.track(worker);
    if (this.o.circuit.failures > 0 && !this.#breakers.has(worker)) {
      this.#breakers.set(worker, new CircuitBreaker(this.o.circuit, this.now));
      this.#m.circuit.set({ worker }, 0);
    }
  }

  /** The worker was removed: stop watching it. */
  forget(worker: string): void {
    this.#tracked.delete(worker);
    this.checks.forget(worker);
    this.#breakers.delete(worker);
    this.#held.delete(worker);
    this.#out.delete(worker);
    this.#m.circuit.delete({ worker });
    for (const reason of ["health_check", "circuit_open", "circuit_trial"]) this.#m.out.delete({ worker, reason });
  }

  /** The operator set the worker's health: "healthy" clears every automatic signal; otherwise it is left alone. */
  operatorSet(worker: string, health: string): void {
    this.#out.delete(worker);
    this.checks.forget(worker);
    this.#breakers.delete(worker);
    if (health === "healthy") {
      this.#held.delete(worker);
      this.track(worker);
    } else {
      this.#held.add(worker);
    }
    this.#gauges(worker);
  }

  /** Out of rotation because of a failed health check or a refused connection. */
  isDown(worker: string): boolean {
    return this.checks.isFailing(worker);
  }

  circuitState(worker: string): CircuitState | undefined {
    return this.#breakers.get(worker)?.state;
  }

  /** A connection to the worker failed or its stream broke: a circuit-breaker failure and, passively, a failing health. */
  connectFailed(worker: string): void {
    if (!this.fleet.get(worker)) return;
    this.attemptFailed(worker, "connect");
  }

  /** An attempt at the worker failed (any UpstreamFailure kind, or a 5xx status). */
  attemptFailed(worker: string, kind: FailureKind, status?: number): void {
    if (!this.#ensure(worker)) return;
    const b = this.#breakers.get(worker);
    if (kind === "status" && status !== undefined && status < 500) {
      b?.inconclusive();
      this.#apply(worker);
      return;
    }
    this.#m.failures.inc({ worker });
    const moved = b?.failure();
    if (moved) this.#transition(worker, moved);
    if ((kind === "connect" || kind === "stream") && this.checks.markUnreachable(worker)) {
      this.log(`worker ${worker} is unreachable; out of rotation until its /health answers`);
    }
    this.#apply(worker);
  }

  /** The worker answered with headers that are not a failure (2xx, or a 4xx that is the request's own fault). */
  attemptSucceeded(worker: string): void {
    if (!this.#ensure(worker)) return;
    const moved = this.#breakers.get(worker)?.success();
    if (moved) this.#transition(worker, moved);
    if (moved) this.#apply(worker);
  }

  /** A request was booked on the worker (router observer, synchronous): a half-open circuit admits only this one. */
  booked(worker: string): void {
    if (this.#breakers.get(worker)?.booked()) this.#apply(worker);
  }

  /** Tracks a worker of the fleet on first sight; false when it is not (or no longer) in the fleet. */
  #ensure(worker: string): boolean {
    if (!this.fleet.get(worker)) return false;
    if (!this.#tracked.has(worker)) this.track(worker);
    return true;
  }

  /** Runs due health probes and circuit cooldowns; resolves when the probes are done. */
  probe(): Promise<void> | undefined {
    for (const w of this.fleet.list()) if (!this.#tracked.has(w.id)) this.track(w.id);
    for (const id of this.#tracked) if (!this.fleet.get(id)) this.forget(id);
    for (const [id, b] of this.#breakers) {
      const moved = b.poll();
      if (moved) {
        this.#transition(id, moved);
        this.#apply(id);
      }
    }
    const due = this.checks.due();
    if (due.length === 0) return undefined;
    return Promise.all(due.map(async (id) => {
      const w = this.fleet.get(id);
      if (!w) {
        this.checks.forget(id);
        return;
      }
      const { result, changed } = await this.checks.probe(id, w.url);
      this.#m.checks.inc({ worker: id, result });
      if (!changed || !this.fleet.get(id)) return;
      this.log(this.checks.isFailing(id) ? `worker ${id} fails its health checks; out of rotation (in-flight requests finish)` : `worker ${id} passes its health checks again; back in rotation`);
      this.#apply(id);
    })).then(() => undefined);
  }

  #transition(worker: string, to: CircuitState): void {
    this.#m.transitions.inc({ worker, to });
    if (to === "open") this.log(`worker ${worker}: circuit open after ${this.o.circuit.failures} failures in a row; no new requests for ${this.o.circuit.openMs} ms`);
    else if (to === "closed") this.log(`worker ${worker}: circuit closed (trial request succeeded)`);
  }

  #reasons(worker: string): Reason[] {
    const r: Reason[] = [];
    if (this.checks.isFailing(worker)) r.push("health_check");
    const b = this.#breakers.get(worker);
    if (b?.state === "open") r.push("circuit_open");
    else if (b?.state === "half_open" && b.trial) r.push("circuit_trial");
    return r;
  }

  #gauges(worker: string): void {
    const reasons = this.#reasons(worker);
    for (const reason of ["health_check", "circuit_open", "circuit_trial"] as const) this.#m.out.set({ worker, reason }, reasons.includes(reason) ? 1 : 0);
    const b = this.#breakers.get(worker);
    if (b) this.#m.circuit.set({ worker }, STATE_VALUE[b.state]);
  }

  /** Puts the router's health in line with the signals, unless the operator holds the worker. */
  #apply(worker: string): void {
    this.#gauges(worker);
    if (this.#held.has(worker) || !this.fleet.get(worker)) return;
    const out = this.#reasons(worker).length > 0;
    if (out === this.#out.has(worker)) return;
    try {
      this.fleet.setHealth(worker, out ? "unhealthy" : "healthy");
    } catch {
      return;
    }
    if (out) this.#out.add(worker);
    else this.#out.delete(worker);
  }
}
