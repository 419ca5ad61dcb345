/**
 * @module Worker registry changes made through the admin API (add, drain or re-enable, remove) shared between router
 * replicas: one JetStream KV entry per worker holding its newest state, so the newest change wins and a replica that
 * starts later reads the current registry before it loads a snapshot or routes.
 */
import type { Fleet, FleetWorker } from "../gateway/fleet.ts";
import type { AdminChanges } from "../gateway/gateway-state.ts";
import type { KvIngest } from "../gateway/kv-ingest.ts";
import type { MetricsRegistry } from "../gateway/metrics-registry.ts";
import type { WorkerHealthMonitor } from "../gateway/worker-health.ts";
import { parseWorker } from "../gateway/config.ts";
import type { WorkerHealth } from "../routing/index.ts";
import { sessionKey as workerKey } from "./session-share.ts";
import type { SyncKv } from "./sync-bus.ts";

export interface RegistryShareDeps {
  kv: SyncKv;
  fleet: Fleet;
  health: WorkerHealthMonitor;
  ingest: KvIngest;
  registry: MetricsRegistry;
  log: (line: string) => void;
  /** Unix ms: orders changes made on different replicas. */
  wallNow?: () => number;
}

interface Entry {
  r: string;
  b: string;
  at: number;
  id: string;
  state: "present" | "removed";
  spec?: Record<string, unknown>;
  health?: WorkerHealth;
}

const enc = new TextEncoder();
const dec = new TextDecoder();
const HEALTH: readonly string[] = ["healthy", "draining", "unhealthy"];

/** A registered worker as the admin API would take it again (parseWorker's fields). */
export function workerSpec(w: FleetWorker): Record<string, unknown> {
  return {
    url: w.url, id: w.id, models: [...w.models], adapters: [...w.adapters], lora_on_demand: w.entry.loadsAdapters, role: w.role,
    block_size: w.blockSize, dp_start: w.dpStart, dp_size: w.dpSize, kv_events: w.kvEvents, total_kv_blocks: w.totalKvBlocks,
    max_batched_tokens: w.maxBatchedTokens, bootstrap_port: w.bootstrapPort, zmq_endpoint: w.zmq?.endpoint,
    replay_endpoint: w.zmq?.replayEndpoint, kv_topic: w.zmq?.topic,
  };
}

export class RegistryShare implements AdminChanges {
  readonly #d: RegistryShareDeps;
  readonly #wall: () => number;
  /** Newest change applied or made here per worker (unix ms). */
  readonly #at = new Map<string, number>();
  /** Changes not yet stored (NATS was down): the newest per worker, retried from tick. */
  readonly #pending = new Map<string, Entry>();
  readonly #applied;
  #queue: Promise<void> = Promise.resolve();
  /** Entries being stored right now (a put waits for NATS while it is down): not sent twice. */
  readonly #inflight = new Set<Entry>();

  constructor(deps: RegistryShareDeps, private readonly replicaId: string, private readonly boot: string) {
    this.#d = deps;
    this.#wall = deps.wallNow ?? Date.now;
    this.#applied = deps.registry.counter("kvgate_sync_registry_applied_total", "Worker registry changes other router replicas made, applied here, by op (add, remove, health, ignored, invalid)");
  }

  /** Reads the current registry and applies it, then follows changes; resolves once the current registry is applied. */
  async start(): Promise<void> {
    try {
      for (const [key, value] of await this.#d.kv.entries()) this.#enqueue(key, value);
      await this.#queue;
    } catch (e) {
      this.#d.log(`worker registry: cannot read the shared one (${(e as Error).message}); following its changes only`);
    }
    this.#d.kv.watch((key, value) => this.#enqueue(key, value));
  }

  workerAdded(id: string): void {
    const w = this.#d.fleet.get(id);
    if (w) this.#publish({ id, state: "present", spec: workerSpec(w) });
  }

  workerHealth(id: string, health: WorkerHealth): void {
    const w = this.#d.fleet.get(id);
    if (w) this.#publish({ id, state: "present", spec: workerSpec(w), health });
  }

  workerRemoved(id: string): void {
    this.#publish({ id, state: "removed" });
  }

  /** Retries changes NATS did not take. */
  tick(): void {
    for (const e of this.#pending.values()) if (!this.#inflight.has(e)) void this.#store(e);
  }

  #publish(e: Omit<Entry, "r" | "b" | "at">): void {
    const at = Math.max(this.#wall(), (this.#at.get(e.id) ?? 0) + 1);
    this.#at.set(e.id, at);
    const full: Entry = { r: this.replicaId, b: this.boot, at, ...e };
    this.#pending.set(e.id, full);
    void this.#store(full);
  }

  async #store(e: Entry): Promise<void> {
    this.#inflight.add(e);
    try {
      const ok = await this.#d.kv.put(workerKey(e.id), enc.encode(JSON.stringify(e)));
      if (ok && this.#pending.get(e.id) === e) this.#pending.delete(e.id);
    } finally {
      this.#inflight.delete(e);
    }
  }

  /** Applied one after another: an add discovers models over HTTP, and a later remove must not overtake it. */
  #enqueue(key: string, value: Uint8Array | undefined): void {
    this.#queue = this.#queue.then(() => this.#apply(key, value)).catch((err: unknown) => {
      this.#applied.inc({ op: "invalid" });
      this.#d.log(`worker registry: a shared change was not applied: ${(err as Error).message}`);
    });
  }

  async #apply(key: string, value: Uint8Array | undefined): Promise<void> {
    if (!value) return;
    const e = JSON.parse(dec.decode(value)) as Entry;
    if (e === null || typeof e !== "object" || typeof e.id !== "string" || workerKey(e.id) !== key || typeof e.at !== "number" ||
      (e.state !== "present" && e.state !== "removed") || (e.health !== undefined && !HEALTH.includes(e.health))) {
      throw new Error(`malformed entry ${key}`);
    }
    if (e.r === this.replicaId && e.b === this.boot) return;
    if (e.at <= (this.#at.get(e.id) ?? -Infinity)) {
      this.#applied.inc({ op: "ignored" });
      return;
    }
    this.#at.set(e.id, e.at);
    const d = this.#d;
    const known = d.fleet.get(e.id);
    if (e.state === "removed") {
      if (!known) return;
      d.fleet.remove(e.id);
      d.health.forget(e.id);
      d.ingest.forget(e.id);
      this.#applied.inc({ op: "remove" });
      d.log(`worker ${e.id} removed by replica ${e.r}`);
      return;
    }
    if (!known) {
      const w = await d.fleet.add(parseWorker(e.spec));
      try {
        await d.ingest.attach(w);
      } catch (err) {
        d.fleet.remove(w.id);
        throw err;
      }
      this.#applied.inc({ op: "add" });
      d.log(`worker ${w.id} added by replica ${e.r}: ${w.url}`);
    }
    if (e.health !== undefined) {
      d.fleet.setHealth(e.id, e.health);
      d.health.operatorSet(e.id, e.health);
      this.#applied.inc({ op: "health" });
    }
  }
}
