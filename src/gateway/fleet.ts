/**
 * @module The gateway's view of its workers: the configured specs the router does not keep (url, discovery,
 * KV-event mode, when each model appeared), kept in step with the router's registry, and the fleet's model list.
 */
import { KvgateError } from "../core/errors.ts";
import type { Router, WorkerHealth, WorkerRole } from "../routing/index.ts";
import { defaultWorkerId, type WorkerConfig } from "./config.ts";

export interface FleetWorker {
  id: string;
  url: string;
  models: string[];
  role: WorkerRole;
  blockSize: number;
  dpStart: number;
  dpSize: number;
  kvEvents: boolean;
  totalKvBlocks?: number;
  maxBatchedTokens?: number;
  /** kvgate subscribes to the engine's KV-event sockets itself (kv-ingest.ts). */
  zmq?: { endpoint: string; replayEndpoint?: string; topic?: string };
  /** SGLang prefill workers' bootstrap server port (disaggregated serving). */
  bootstrapPort?: number;
}

export interface FleetOptions {
  blockSize: number;
  kvEvents: "auto" | "on" | "off";
  /** Whether kvgate tokenizes this model exactly as the engine does (decides kvEvents "auto"). */
  precise: (model: string) => boolean;
  fetch: typeof fetch;
  /** Model discovery timeout. */
  discoverTimeoutMs?: number;
}

export class Fleet {
  readonly #workers = new Map<string, FleetWorker>();
  /** Unix seconds each model was first served, for /v1/models. */
  readonly #firstSeen = new Map<string, number>();

  constructor(private readonly router: Router, private readonly opts: FleetOptions) {}

  /** Registers a worker with the router, asking its /v1/models first when no models were given. */
  async add(cfg: WorkerConfig): Promise<FleetWorker> {
    const id = cfg.id ?? defaultWorkerId(cfg.url);
    if (this.#workers.has(id)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${id} is already registered`, { worker: id });
    const models = cfg.models && cfg.models.length > 0 ? cfg.models : await this.#discover(cfg.url);
    const kvEvents = cfg.kvEvents ?? (this.opts.kvEvents === "auto" ? models.every(this.opts.precise) : this.opts.kvEvents === "on");
    const w: FleetWorker = {
      id, url: cfg.url, models, role: cfg.role ?? "aggregated", blockSize: cfg.blockSize ?? this.opts.blockSize,
      dpStart: cfg.dpStart ?? 0, dpSize: cfg.dpSize ?? 1, kvEvents, totalKvBlocks: cfg.totalKvBlocks, maxBatchedTokens: cfg.maxBatchedTokens,
      zmq: cfg.zmqEndpoint ? { endpoint: cfg.zmqEndpoint, replayEndpoint: cfg.replayEndpoint, topic: cfg.kvTopic } : undefined,
      bootstrapPort: cfg.bootstrapPort,
    };
    this.router.addWorker({
      id, endpoint: w.url, models, role: w.role, blockSize: w.blockSize, dpStart: w.dpStart, dpSize: w.dpSize, kvEvents,
      totalKvBlocks: w.totalKvBlocks, maxBatchedTokens: w.maxBatchedTokens,
    });
    this.#workers.set(id, w);
    const now = Math.floor(Date.now() / 1000);
    for (const m of models) if (!this.#firstSeen.has(m)) this.#firstSeen.set(m, now);
    return w;
  }

  async #discover(url: string): Promise<string[]> {
    let body: unknown;
    try {
      const res = await this.opts.fetch(`${url}/v1/models`, { signal: AbortSignal.timeout(this.opts.discoverTimeoutMs ?? 5_000) });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      body = await res.json();
    } catch (e) {
      throw new KvgateError("KVGATE_ERR_UPSTREAM", `cannot list the models of ${url} (${(e as Error).message}); give models=`, { url });
    }
    const data = (body as { data?: unknown })?.data;
    const ids = Array.isArray(data) ? data.map((m) => (m as { id?: unknown })?.id).filter((m): m is string => typeof m === "string" && m.length > 0) : [];
    if (ids.length === 0) throw new KvgateError("KVGATE_ERR_UPSTREAM", `${url}/v1/models lists no models; give models=`, { url });
    return ids;
  }

  /** Forgets the worker (its bookings are freed, its index entries dropped); returns the freed bookings. */
  remove(id: string): number {
    this.require(id);
    this.#workers.delete(id);
    return this.router.removeWorker(id);
  }

  setHealth(id: string, health: WorkerHealth): void {
    this.require(id);
    this.router.setWorkerHealth(id, health);
  }

  get(id: string): FleetWorker | undefined {
    return this.#workers.get(id);
  }

  require(id: string): FleetWorker {
    const w = this.#workers.get(id);
    if (!w) throw new KvgateError("KVGATE_ERR_UNKNOWN_WORKER", `unknown worker ${id}`, { worker: id });
    return w;
  }

  list(): FleetWorker[] {
    return [...this.#workers.values()];
  }

  get size(): number {
    return this.#workers.size;
  }

  serves(model: string): boolean {
    for (const w of this.#workers.values()) if (w.models.includes(model)) return true;
    return false;
  }

  /** The union of the fleet's models, in the OpenAI list shape. */
  models(): { id: string; object: "model"; created: number; owned_by: string }[] {
    const names = new Set<string>();
    for (const w of this.#workers.values()) for (const m of w.models) names.add(m);
    return [...names].sort().map((id) => ({ id, object: "model", created: this.#firstSeen.get(id) ?? 0, owned_by: "kvgate" }));
  }
}
