/**
 * @module The gateway's side of the worker list: model discovery, the few settings the router does not keep (KV-event
 * sockets, bootstrap port), when each model appeared, and the fleet's model list; the router's registry holds the rest.
 */
import { KvgateError } from "../core/errors.ts";
import type { Router, WorkerEntry, WorkerHealth, WorkerRole } from "../routing/index.ts";
import { AdapterCatalog } from "./adapter-catalog.ts";
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

  get adapters(): readonly string[] {
    return this.entry.adapters;
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
  /** LoRA adapters known at once (default 256). */
  maxAdapters?: number;
  /** Called after each worker joined (the index-size check). */
  added?: (worker: FleetWorker) => void;
}

/** What a worker serves: base models, and adapters with their parent model. */
interface Served {
  models: string[];
  adapters: [string, string][];
}

export class Fleet {
  readonly #workers = new Map<string, FleetWorker>();
  /** Unix seconds each model was first served, for /v1/models. */
  readonly #firstSeen = new Map<string, number>();
  readonly adapters: AdapterCatalog;

  constructor(private readonly router: Router, private readonly opts: FleetOptions) {
    this.adapters = new AdapterCatalog(opts.maxAdapters ?? 256);
  }

  /** Registers a worker with the router, asking its /v1/models first when no models were given. */
  async add(cfg: WorkerConfig): Promise<FleetWorker> {
    const id = cfg.id ?? defaultWorkerId(cfg.url);
    if (this.#workers.has(id)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${id} is already registered`, { worker: id });
    const served: Served = cfg.models && cfg.models.length > 0 ? { models: cfg.models, adapters: [] } : await this.#discover(cfg.url);
    const models = served.models;
    for (const a of cfg.adapters ?? []) if (!served.adapters.some(([n]) => n === a)) served.adapters.push([a, models[0]!]);
    this.adapters.check(served.adapters);
    const kvEvents = cfg.kvEvents ?? (this.opts.kvEvents === "auto" ? models.every(this.opts.precise) : this.opts.kvEvents === "on");
    const entry = this.router.addWorker({
      id, endpoint: cfg.url, models, adapters: served.adapters.map(([n]) => n), loadsAdapters: cfg.loadsAdapters, role: cfg.role ?? "aggregated", blockSize: cfg.blockSize ?? this.opts.blockSize, dpStart: cfg.dpStart ?? 0,
      dpSize: cfg.dpSize ?? 1, kvEvents, eagle: cfg.eagle, totalKvBlocks: cfg.totalKvBlocks, maxBatchedTokens: cfg.maxBatchedTokens,
    });
    const w = new FleetWorker(entry, cfg.zmqEndpoint ? { endpoint: cfg.zmqEndpoint, replayEndpoint: cfg.replayEndpoint, topic: cfg.kvTopic } : undefined,
      cfg.bootstrapPort);
    this.#workers.set(id, w);
    for (const [name, parent] of served.adapters) this.adapters.add(name, parent);
    const now = Math.floor(Date.now() / 1000);
    for (const m of [...models, ...w.adapters]) if (!this.#firstSeen.has(m)) this.#firstSeen.set(m, now);
    this.opts.added?.(w);
    return w;
  }

  /** vLLM lists each adapter as a model whose `parent` is its base model. */
  async #discover(url: string): Promise<Served> {
    let body: unknown;
    try {
      const res = await this.opts.fetch(`${url}/v1/models`, { signal: AbortSignal.timeout(this.opts.discoverTimeoutMs ?? 5_000) });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      body = await res.json();
    } catch (e) {
      throw new KvgateError("KVGATE_ERR_UPSTREAM", `cannot list the models of ${url} (${(e as Error).message}); give models=`, { url });
    }
    const data = (body as { data?: unknown })?.data;
    const served: Served = { models: [], adapters: [] };
    for (const m of Array.isArray(data) ? data as { id?: unknown; parent?: unknown }[] : []) {
      if (typeof m?.id !== "string" || m.id.length === 0) continue;
      if (typeof m.parent === "string" && m.parent.length > 0) served.adapters.push([m.id, m.parent]);
      else served.models.push(m.id);
    }
    if (served.models.length === 0) throw new KvgateError("KVGATE_ERR_UPSTREAM", `${url}/v1/models lists no models; give models=`, { url });
    return served;
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

  /** Whether some worker serves adapter `name` of `parent`, or can load it. */
  servesAdapter(name: string, parent: string): boolean {
    for (const w of this.#workers.values()) {
      if (w.models.includes(parent) && (w.adapters.includes(name) || w.entry.loadsAdapters)) return true;
    }
    return false;
  }

  /** The union of the fleet's models and the adapters it serves (with `parent`, as vLLM lists them), in the OpenAI list shape. */
  models(): { id: string; object: "model"; created: number; owned_by: string; parent: string | null }[] {
    const names = new Set<string>();
    for (const w of this.#workers.values()) for (const m of w.models) names.add(m);
    const out = [...names].sort().map((id) => ({ id, object: "model" as const, created: this.#firstSeen.get(id) ?? 0, owned_by: "kvgate", parent: null as string | null }));
    for (const [id, parent] of this.adapters.list()) {
      if (!names.has(id) && this.servesAdapter(id, parent)) out.push({ id, object: "model", created: this.#firstSeen.get(id) ?? 0, owned_by: "kvgate", parent });
    }
    return out;
  }
}
