/**
 * @module The gateway's side of the worker list: model discovery, the few settings the router does not keep (KV-event
 * sockets, bootstrap port), when each model appeared, and the fleet's model list; the router's registry holds the rest.
 */
import { KvgateError } from "../core/errors.ts";
import type { Router, WorkerEntry, WorkerHealth, WorkerRole } from "../routing/index.ts";
import { defaultWorkerId, type WorkerConfig } from "./config.ts";

/**
 * A worker as the gateway sees it: what only the gateway needs (how to reach its KV-event sockets, its SGLang bootstrap
 * port) beside the router's registry entry, which holds everything else; the getters read that entry, never a copy.
 */
export class FleetWorker {
  constructor(readonly entry: WorkerEntry,
    /** kvgate subscribes to the engine's KV-event sockets itself (kv-ingest.ts). */
    readonly zmq: { endpoint: string; replayEndpoint?: string; topic?: string } | undefined,
    /** SGLang prefill workers' bootstrap server port (disaggregated serving). */
    readonly bootstrapPort: number | undefined) {}

  get id(): string {
    return this.entry.id;
  }

  get url(): string {
    return this.entry.endpoint;
  }

  get kvEvents(): boolean {
    return this.entry.kvEvents;
  }

  get models(): readonly string[] {
    return this.entry.models;
  }

  get role(): WorkerRole {
    return this.entry.role;
  }

  get blockSize(): number {
    return this.entry.blockSize;
  }

  get totalKvBlocks(): number | undefined {
    return this.entry.totalKvBlocks;
  }

  get maxBatchedTokens(): number | undefined {
    return this.entry.maxBatchedTokens;
  }

  get dpStart(): number {
    return this.entry.ranks[0]!.dpRank;
  }

  get dpSize(): number {
    return this.entry.ranks.length;
  }
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
    const entry = this.router.addWorker({
      id, endpoint: cfg.url, models, role: cfg.role ?? "aggregated", blockSize: cfg.blockSize ?? this.opts.blockSize, dpStart: cfg.dpStart ?? 0,
      dpSize: cfg.dpSize ?? 1, kvEvents, totalKvBlocks: cfg.totalKvBlocks, maxBatchedTokens: cfg.maxBatchedTokens,
    });
    const w = new FleetWorker(entry, cfg.zmqEndpoint ? { endpoint: cfg.zmqEndpoint, replayEndpoint: cfg.replayEndpoint, topic: cfg.kvTopic } : undefined,
      cfg.bootstrapPort);
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
