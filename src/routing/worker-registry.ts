/** @module The fleet as the router sees it: workers, their ranks and index slots, health, and the candidate lists per model and role. */
import { KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import { LoadTable } from "./load-table.ts";
import { RankLoad } from "./rank-load.ts";
import { rankKeyOf } from "./tie-break.ts";
import type { WorkerHealth, WorkerRole, WorkerSpec } from "./routing-types.ts";

export interface WorkerEntry {
  readonly id: string;
  readonly endpoint: string;
  readonly models: readonly string[];
  /** LoRA adapters it serves (their served names). */
  readonly adapters: readonly string[];
  /** It loads any adapter of its models on demand. */
  readonly loadsAdapters: boolean;
  readonly role: WorkerRole;
  readonly blockSize: number;
  readonly totalKvBlocks?: number;
  readonly maxBatchedTokens?: number;
  readonly kvEvents: boolean;
  /** Its block hashes use EAGLE windows (WorkerSpec.eagle). */
  readonly eagle: boolean;
  health: WorkerHealth;
  /** The KV-event view of this worker lost events it could not recover: score it as caching nothing until rebuilt. */
  cacheCold?: boolean;
  readonly ranks: readonly RankState[];
  /** False once removed; lets holders of a stale reference notice. */
  registered: boolean;
}

export interface RankState {
  readonly worker: WorkerEntry;
  readonly dpRank: number;
  /** The KvIndex slot of (worker, rank), cached so the hot path avoids the slot map's string keys. */
  readonly slot: number;
  /** Rendezvous identity of (worker, rank) (rankKeyOf), computed once: ties and hot-prefix sets hash it per candidate. */
  readonly key: number;
  readonly load: RankLoad;
}

const ROLES: readonly WorkerRole[] = ["aggregated", "prefill", "decode"];
const HEALTH: readonly WorkerHealth[] = ["healthy", "draining", "unhealthy"];

/** Whether the worker serves adapter `lora` (always, for a base-model request). */
export function servesAdapter(w: WorkerEntry, lora: string | undefined): boolean {
  return lora === undefined || w.loadsAdapters || w.adapters.includes(lora);
}

function bad(message: string): never {
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message);
}

function optionalPositive(name: string, v: number | undefined): void {
  if (v !== undefined && !(Number.isFinite(v) && v > 0)) bad(`${name} must be a positive number, got ${v}`);
}

export class WorkerRegistry {
  readonly #workers = new Map<string, WorkerEntry>();
  /** Healthy ranks per "model\0role" ("\0role" for requests without a model); rebuilt lazily after any change. */
  #eligible = new Map<string, RankState[]>();
  /** Bumped on every change so callers can tell a cached view went stale. */
  version = 0;
  /** Every registered rank's load by index slot, as selection reads it. */
  readonly loads: LoadTable;

  constructor(private readonly index: KvIndex, private readonly assumeKvReuse: boolean) {
    this.loads = new LoadTable(index.options.maxSlots);
  }

  add(spec: WorkerSpec): WorkerEntry {
    if (typeof spec.id !== "string" || spec.id.length === 0) bad("worker id must be a non-empty string");
    if (this.#workers.has(spec.id)) bad(`worker ${spec.id} is already registered`);
    if (!Array.isArray(spec.models) || spec.models.length === 0) bad(`worker ${spec.id} must serve at least one model`);
    const role = spec.role ?? "aggregated";
    if (!ROLES.includes(role)) bad(`unknown role ${String(role)}`);
    const health = spec.health ?? "healthy";
    if (!HEALTH.includes(health)) bad(`unknown health ${String(health)}`);
    const dpStart = spec.dpStart ?? 0, dpSize = spec.dpSize ?? 1;
    if (!Number.isInteger(dpStart) || dpStart < 0) bad(`dpStart must be a non-negative integer, got ${dpStart}`);
    if (!Number.isInteger(dpSize) || dpSize < 1) bad(`dpSize must be a positive integer, got ${dpSize}`);
    if (!Number.isInteger(spec.blockSize) || spec.blockSize < 1) bad(`blockSize must be a positive integer, got ${spec.blockSize}`);
    optionalPositive("totalKvBlocks", spec.totalKvBlocks);
    optionalPositive("maxBatchedTokens", spec.maxBatchedTokens);
    // One route() call hashes a prompt with one block size, so all workers of a model must agree on it.
    for (const model of spec.models) {
      const other = this.#anyServing(model);
      if (other && other.blockSize !== spec.blockSize) {
        bad(`worker ${spec.id} uses block size ${spec.blockSize} but ${other.id} serves ${model} with ${other.blockSize}`);
      }
      if (other && other.eagle !== (spec.eagle === true)) {
        bad(`worker ${spec.id} ${spec.eagle === true ? "runs" : "does not run"} EAGLE but ${other.id}, serving ${model}, ${other.eagle ? "does" : "does not"}: their block hashes differ`);
      }
    }
    const ranks: RankState[] = [];
    const entry: WorkerEntry = {
      id: spec.id, endpoint: spec.endpoint, models: [...spec.models], adapters: [...(spec.adapters ?? [])],
      loadsAdapters: spec.loadsAdapters === true, role, blockSize: spec.blockSize,
      totalKvBlocks: spec.totalKvBlocks, maxBatchedTokens: spec.maxBatchedTokens, kvEvents: spec.kvEvents ?? true,
      eagle: spec.eagle === true, health, cacheCold: false, ranks, registered: true,
    };
    try {
      for (let r = dpStart; r < dpStart + dpSize; r++) {
        const slot = this.index.slotFor(spec.id, r), key = rankKeyOf(spec.id, r);
        this.loads.claim(slot, { key, blockSize: entry.blockSize, eagle: entry.eagle, kvEvents: entry.kvEvents });
        ranks.push({ worker: entry, dpRank: r, slot, key, load: new RankLoad(this.assumeKvReuse, this.loads, slot) });
      }
    } catch (e) {
      // Out of index slots: give back the ones this worker took so a failed add leaves nothing behind.
      for (const r of ranks) this.loads.release(r.slot);
      this.index.removeWorker(spec.id);
      throw e;
    }
    this.#workers.set(spec.id, entry);
    this.#changed();
    return entry;
  }

  #anyServing(model: string): WorkerEntry | undefined {
    for (const w of this.#workers.values()) if (w.models.includes(model)) return w;
    return undefined;
  }

  get(id: string): WorkerEntry | undefined {
    return this.#workers.get(id);
  }

  /** The worker or a typed 404. */
  require(id: string): WorkerEntry {
    const w = this.#workers.get(id);
    if (!w) throw new KvgateError("KVGATE_ERR_UNKNOWN_WORKER", `unknown worker ${id}`, { worker: id });
    return w;
  }

  setHealth(id: string, health: WorkerHealth): WorkerEntry {
    if (!HEALTH.includes(health)) bad(`unknown health ${String(health)}`);
    const w = this.require(id);
    if (w.health !== health) {
      w.health = health;
      this.#changed();
    }
    return w;
  }

  /** Forgets the worker and drops its index entries; the caller frees its bookings. */
  remove(id: string): WorkerEntry | undefined {
    const w = this.#workers.get(id);
    if (!w) return undefined;
    this.#workers.delete(id);
    w.registered = false;
    for (const r of w.ranks) {
      r.load.detach();
      this.loads.release(r.slot);
    }
    this.index.removeWorker(id);
    this.#changed();
    return w;
  }

  workers(): IterableIterator<WorkerEntry> {
    return this.#workers.values();
  }

  get size(): number {
    return this.#workers.size;
  }

  /**
   * Healthy ranks of `role` serving `model` (any model when undefined) and adapter `lora` when given. The array is
   * shared: do not mutate it. Lists are cached per model and role only, so unknown adapter names cost no memory.
   */
  eligible(model: string | undefined, role: WorkerRole, lora?: string): readonly RankState[] {
    const base = this.#eligibleFor(model, role);
    return lora === undefined ? base : base.filter((r) => servesAdapter(r.worker, lora));
  }

  #eligibleFor(model: string | undefined, role: WorkerRole): readonly RankState[] {
    const key = `${model ?? ""}\u0000${role}`;
    let list = this.#eligible.get(key);
    if (list) return list;
    list = [];
    for (const w of this.#workers.values()) {
      if (w.health !== "healthy" || w.role !== role) continue;
      if (model !== undefined && !w.models.includes(model)) continue;
      list.push(...w.ranks);
    }
    this.#eligible.set(key, list);
    return list;
  }

  /** Whether `rank` is still a healthy member of the fleet for this model and role. */
  isEligible(rank: RankState, model: string | undefined, role: WorkerRole, lora?: string): boolean {
    const w = rank.worker;
    return w.registered && w.health === "healthy" && w.role === role && (model === undefined || w.models.includes(model)) &&
      servesAdapter(w, lora);
  }

  #changed(): void {
    this.version++;
    this.#eligible = new Map();
  }
}
