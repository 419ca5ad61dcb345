/**
 * @module How many (worker rank, block) entries the KV index reserves: by default what the configured fleet can hold
 * (its workers' total KV blocks × a factor), so a small fleet gets a small, cache-friendly table and a large one is not
 * cut short; an explicit --index-capacity always wins. The core reserves its tables once (they cannot grow), so workers
 * added later are checked against the size chosen at start.
 */

/** Entries the index holds when no worker states its KV size (the fixed default before fleet sizing). */
export const DEFAULT_INDEX_CAPACITY = 1 << 18;
/** The core's bounds on capacity (the --index-capacity option range). */
export const MIN_INDEX_CAPACITY = 1024;
export const MAX_INDEX_CAPACITY = 1 << 26;
/**
 * A worker with KV events: the index mirrors the engine, so it holds at most the engine's blocks per rank. The 25%
 * headroom covers what the mirror briefly holds beyond that: a batch's Stored events applied before the Removed of the
 * blocks they replaced, and a restarted engine's new blocks while its old view is still being dropped.
 */
export const EVENT_FACTOR = 1.25;
/**
 * A worker without KV events (approximate mode): kvgate records the blocks it routes there and keeps them for the
 * approximate TTL; the engine's own LRU may have dropped them well before, so its entries can exceed its real KV blocks.
 * Twice its blocks keeps a TTL's worth of traffic at the engine's turnover without sizing for unbounded traffic.
 */
export const APPROX_FACTOR = 2;

/** The facts about one worker the sizing needs. */
export interface SizedWorker {
  /** KV blocks of one data-parallel rank (the engine's num_gpu_blocks); absent when not configured. */
  totalKvBlocks?: number;
  /** Data-parallel ranks: each is its own engine and index slot. Default 1. */
  dpSize?: number;
  /** Whether the index follows this worker by KV events (else approximate mode); unknown counts as approximate. */
  kvEvents?: boolean;
}

export interface IndexSize {
  capacity: number;
  /** flag: --index-capacity (or its config key / variable); fleet: from the workers' KV blocks; default: nothing to size from. */
  source: "flag" | "fleet" | "default";
  /** Σ blocks × ranks of the workers considered (0 when none states its size). */
  fleetBlocks: number;
}

/**
 * Entries the fleet calls for, or undefined when no worker states its size. A worker without a stated size counts as
 * the largest stated one: under-sizing costs hits, over-sizing only memory, and its size is unknown.
 */
export function fleetEntries(workers: readonly SizedWorker[]): { entries: number; blocks: number } | undefined {
  let largest = 0;
  for (const w of workers) if (w.totalKvBlocks !== undefined && w.totalKvBlocks > largest) largest = w.totalKvBlocks;
  if (largest === 0) return undefined;
  let entries = 0;
  let blocks = 0;
  for (const w of workers) {
    const b = (w.totalKvBlocks ?? largest) * Math.max(1, w.dpSize ?? 1);
    blocks += b;
    entries += b * (w.kvEvents === true ? EVENT_FACTOR : APPROX_FACTOR);
  }
  return { entries: Math.ceil(entries), blocks };
}

/** The index size: the explicit value when given, else the fleet's need clamped to the core's bounds, else the default. */
export function chooseIndexSize(explicit: number | undefined, workers: readonly SizedWorker[]): IndexSize {
  const need = fleetEntries(workers);
  if (explicit !== undefined) return { capacity: explicit, source: "flag", fleetBlocks: need?.blocks ?? 0 };
  if (need === undefined) return { capacity: DEFAULT_INDEX_CAPACITY, source: "default", fleetBlocks: 0 };
  return { capacity: Math.min(MAX_INDEX_CAPACITY, Math.max(MIN_INDEX_CAPACITY, need.entries)), source: "fleet", fleetBlocks: need.blocks };
}

/** The start-up log line. */
export function describeIndexSize(s: IndexSize, memoryBytes: number): string {
  const mb = (memoryBytes / (1 << 20)).toFixed(0);
  const why = s.source === "flag" ? "set by --index-capacity"
    : s.source === "fleet" ? `sized from the fleet's ${s.fleetBlocks} KV blocks (×${EVENT_FACTOR} with KV events, ×${APPROX_FACTOR} approximate)`
    : `default: no configured worker states total_kv_blocks`;
  return `KV index: ${s.capacity} entries, ${why}; ~${mb} MB reserved`;
}

/**
 * Workers added after start (admin API, replicas) cannot enlarge the index: the core reserved its tables at start.
 * Each addition that leaves the fleet needing more entries than the index holds is warned about and counted; the index
 * then evicts its oldest entries sooner than the engines do, which costs predicted hits, not correctness.
 */
export class IndexSizeWatch {
  #outgrown = 0;

  constructor(readonly size: IndexSize, private readonly warn: (message: string) => void, private readonly counted: () => void) {}

  /** Additions so far that left the fleet larger than the index. */
  get outgrown(): number {
    return this.#outgrown;
  }

  /** Called after a worker joined, with the whole fleet (that worker included). */
  added(worker: string, fleet: readonly SizedWorker[]): void {
    const need = fleetEntries(fleet);
    if (need === undefined || need.entries <= this.size.capacity) return;
    this.#outgrown++;
    this.counted();
    this.warn(`worker ${worker}: the fleet now calls for ${need.entries} KV index entries (${need.blocks} KV blocks) but the index holds ` +
      `${this.size.capacity}, fixed at start; restart kvgate (or raise --index-capacity) to size it for this fleet`);
  }
}
