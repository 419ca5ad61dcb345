/**
 * @module Turns a Mooncake-format trace (JSON Lines with `hash_ids`, one id per 512-token block) into a KV-event
 * replay: a simulated fleet of N workers, each an LRU cache of C blocks, and for every request the router's
 * find_matches query followed by the KV events the chosen worker emits.
 *
 * Default input: `bench/data/synthetic_trace.jsonl` (Mooncake FAST'25 synthetic trace, kvcache-ai/Mooncake,
 * Apache-2.0; 3,993 requests). Override with `--trace PATH`.
 *
 * Model (everything is deterministic; no randomness):
 * - Engine blocks. Each trace id covers 512 tokens; engines use smaller blocks, so each id is split into
 *   `split` engine blocks of 512/split tokens (default 8 → 64-token blocks; `--split 1` keeps one block per id).
 *   A prompt has min(ids × split, ⌈input_length / (512/split)⌉) blocks: like the trace, the last, partly filled
 *   block counts. Sub-block j of id i is the "block content" u = i·split + j.
 * - Prefix tree. A block is identified by its whole prefix: node = (parent node, u). (In the Mooncake traces a
 *   hash_id always follows the same predecessor, so this equals u; the tree keeps us honest if not.)
 * - Hashes. local(u) = splitmix64(u ⊕ LOCAL_SALT) stands for the XXH3 of the block's tokens (the trace does not
 *   publish tokens). The router's sequence hash is the chain of the core: seq(first) = local, seq(child) =
 *   XXH3(le64(seq(parent)) ‖ le64(local(child)), 1337) (computed with the TS reference `chainReference`). The
 *   engine block hash (what Stored/Removed events carry) is a different deterministic function of the prefix,
 *   engine(node) = splitmix64(seq(node) ⊕ ENGINE_SALT), as vLLM's block hash is its own chained hash of the prefix.
 * - Workers. Each worker caches whole blocks, LRU. When a request runs on a worker, its prefix blocks are touched
 *   deepest-first, so the first block of a prompt is the most recent: a block is always more recent than its
 *   descendants and eviction removes leaves before their parents (vLLM frees a request's blocks tail-first for the
 *   same reason). Each worker's cache therefore stays prefix-closed.
 * - Routing policy ("cost"): worker w's cost = blocks it must prefill (prompt blocks − cached leading blocks) +
 *   its recent prefill load (new blocks assigned to it, decayed by 0.9 per request); the lowest cost wins, ties go
 *   to the lowest worker index. The cached-prefix lengths come from the simulator's exact state, which is what the
 *   indexes hold after applying the same events (the benchmark verifies find_matches against it).
 * - Events per request, in order: find_matches(prompt sequence hashes); Removed(engine hashes of the LRU blocks
 *   evicted to make room), if any; Stored(parent = engine hash of the last cached prefix block or none, blocks =
 *   the new blocks as (engine hash, local hash)), if any.
 * - Drain. After the last request every worker emits Removed for all blocks it still holds, so the indexes end
 *   empty and the stream can be replayed again from the same state (the benchmark loops over it).
 */
import { readFileSync } from "node:fs";
import { chainStep } from "../src/reference/index-reference.ts";

export const DEFAULT_TRACE = new URL("./data/synthetic_trace.jsonl", import.meta.url);

export const LOCAL_SALT = 0x6b76_6761_7465_4c4fn; // "kvgateLO"
export const ENGINE_SALT = 0x6b76_6761_7465_454en; // "kvgateEN"

const M64 = (1n << 64n) - 1n;

/** splitmix64 finaliser over BigInt (generation time only; never on a measured path). */
export function splitmix64(x: bigint): bigint {
  let z = (x + 0x9e3779b97f4a7c15n) & M64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
  return z ^ (z >> 31n);
}

export interface TraceRequest {
  timestamp: number;
  inputLength: number;
  outputLength: number;
  hashIds: number[];
}

export interface MatchOp {
  kind: "match";
  /** Index of the request in the trace. */
  request: number;
  /** The prompt's router sequence hashes. */
  seq: bigint[];
  /** Simulator's truth: the longest cached prefix over all workers, and how many workers hold ≥ 1 leading block. */
  bestDepth: number;
  matchedWorkers: number;
  /** Worker the request was routed to. */
  worker: number;
}

export interface StoredOp {
  kind: "stored";
  worker: number;
  parent: bigint | null;
  blocks: { hash: bigint; local: bigint }[];
  /** The same blocks as parallel arrays (for the binary encoder). */
  hashes: bigint[];
  locals: bigint[];
}

export interface RemovedOp {
  kind: "removed";
  worker: number;
  hashes: bigint[];
}

export type ReplayOp = MatchOp | StoredOp | RemovedOp;
export type EventOp = StoredOp | RemovedOp;

export interface ReplayOptions {
  trace?: string | URL;
  workers?: number;
  /** Blocks each worker caches. */
  capacity?: number;
  /** Engine blocks per 512-token trace block (1, 2, 4, …, 512). Default 8 (64-token blocks). */
  split?: number;
  /** Use only the first `limit` requests. */
  limit?: number;
  /** Per-request decay of the recent-load term of the routing cost. */
  loadDecay?: number;
}

export interface ReplayStats {
  requests: number;
  workers: number;
  capacityPerWorker: number;
  split: number;
  tokensPerBlock: number;
  promptBlocks: number;
  cachedPromptBlocks: number;
  /** cachedPromptBlocks / promptBlocks: the fleet's prefix hit ratio under this policy. */
  hitRatio: number;
  distinctNodes: number;
  storedEvents: number;
  storedBlocks: number;
  removedEvents: number;
  removedBlocks: number;
  /** Of removedEvents/removedBlocks, those of the final drain. */
  drainEvents: number;
  drainBlocks: number;
  /** Requests routed to each worker. */
  perWorker: number[];
  maxIndexEntries: number;
}

export interface Replay {
  trace: string;
  ops: ReplayOp[];
  /** ops without the find_matches queries (the event stream alone). */
  events: EventOp[];
  /** Indices into ops where each request starts (for per-request batching); length = requests + 1 for the drain. */
  requestStarts: number[];
  stats: ReplayStats;
}

export function readTrace(path: string | URL = DEFAULT_TRACE, limit = Infinity): TraceRequest[] {
  const text = readFileSync(path, "utf8");
  const out: TraceRequest[] = [];
  for (const line of text.split("\n")) {
    if (out.length >= limit) break;
    if (line.trim() === "") continue;
    const r = JSON.parse(line) as { timestamp: number; input_length: number; output_length: number; hash_ids: number[] };
    if (!Array.isArray(r.hash_ids)) throw new Error(`trace line ${out.length + 1} has no hash_ids`);
    out.push({ timestamp: r.timestamp, inputLength: r.input_length, outputLength: r.output_length, hashIds: r.hash_ids });
  }
  return out;
}

interface Node {
  local: bigint;
  seq: bigint;
  engine: bigint;
}

/** LRU of node ids on an insertion-ordered Map (first key = least recent). */
class Lru {
  readonly m = new Map<number, true>();
  has(n: number): boolean {
    return this.m.has(n);
  }
  touch(n: number): void {
    this.m.delete(n);
    this.m.set(n, true);
  }
  evictOne(): number {
    const first = this.m.keys().next();
    if (first.done) throw new Error("evict from empty cache");
    this.m.delete(first.value);
    return first.value;
  }
  get size(): number {
    return this.m.size;
  }
}

export function buildReplay(opts: ReplayOptions = {}): Replay {
  const workers = opts.workers ?? 16;
  const capacity = opts.capacity ?? 4096;
  const decay = opts.loadDecay ?? 0.9;
  const split = opts.split ?? 8;
  if (!Number.isInteger(split) || split < 1 || 512 % split !== 0) throw new Error(`split must divide 512, got ${split}`);
  const tokensPerBlock = 512 / split;
  const tracePath = opts.trace ?? DEFAULT_TRACE;
  const trace = readTrace(tracePath, opts.limit ?? Infinity);

  const nodes: Node[] = [];
  const nodeOf = new Map<number, number>(); // (parent + 1) * 2^32 + u → node
  const localOf = new Map<number, bigint>();
  const localHash = (u: number): bigint => {
    let h = localOf.get(u);
    if (h === undefined) localOf.set(u, (h = splitmix64(BigInt(u) ^ LOCAL_SALT)));
    return h;
  };
  const node = (parent: number, u: number): number => {
    if (u < 0 || u >= 2 ** 32 || parent >= 2 ** 20) throw new Error(`block ${u} (parent node ${parent}) out of range`);
    const key = (parent + 1) * 2 ** 32 + u;
    let n = nodeOf.get(key);
    if (n === undefined) {
      const local = localHash(u);
      const seq = parent < 0 ? local : chainStep(nodes[parent]!.seq, local);
      n = nodes.length;
      nodes.push({ local, seq, engine: splitmix64(seq ^ ENGINE_SALT) });
      nodeOf.set(key, n);
    }
    return n;
  };

  const caches = Array.from({ length: workers }, () => new Lru());
  const recent = new Float64Array(workers);
  const perWorker = new Array<number>(workers).fill(0);
  const ops: ReplayOp[] = [];
  const events: EventOp[] = [];
  const requestStarts: number[] = [];
  const st = { promptBlocks: 0, cached: 0, storedEvents: 0, storedBlocks: 0, removedEvents: 0, removedBlocks: 0, entries: 0, maxEntries: 0 };
  const depth = new Int32Array(workers);

  trace.forEach((req, r) => {
    requestStarts.push(ops.length);
    const path: number[] = [];
    let parent = -1;
    const n = Math.min(req.hashIds.length * split, Math.ceil(req.inputLength / tokensPerBlock));
    for (let b = 0; b < n; b++) path.push((parent = node(parent, req.hashIds[Math.floor(b / split)]! * split + (b % split))));
    if (n > capacity) throw new Error(`request ${r} has ${n} blocks, more than a worker caches (${capacity})`);
    let best = 0, matched = 0, choice = 0, choiceCost = Infinity;
    for (let w = 0; w < workers; w++) {
      const c = caches[w]!;
      let d = 0;
      while (d < n && c.has(path[d]!)) d++;
      depth[w] = d;
      if (d > best) best = d;
      if (d > 0) matched++;
      const cost = n - d + recent[w]!;
      if (cost < choiceCost) { choiceCost = cost; choice = w; }
    }
    ops.push({ kind: "match", request: r, seq: path.map((p) => nodes[p]!.seq), bestDepth: best, matchedWorkers: matched, worker: choice });

    const cache = caches[choice]!;
    const k = depth[choice]!;
    const fresh = n - k;
    st.promptBlocks += n;
    st.cached += k;
    perWorker[choice]!++;
    for (let w = 0; w < workers; w++) recent[w]! *= decay;
    recent[choice]! += fresh;

    for (let i = k - 1; i >= 0; i--) cache.touch(path[i]!);
    const evicted: bigint[] = [];
    while (cache.size + fresh > capacity) evicted.push(nodes[cache.evictOne()]!.engine);
    if (evicted.length > 0) {
      const op: RemovedOp = { kind: "removed", worker: choice, hashes: evicted };
      ops.push(op);
      events.push(op);
      st.removedEvents++;
      st.removedBlocks += evicted.length;
      st.entries -= evicted.length;
    }
    if (fresh > 0) {
      for (let i = n - 1; i >= k; i--) cache.touch(path[i]!);
      for (let i = k - 1; i >= 0; i--) cache.touch(path[i]!);
      const added = path.slice(k).map((p) => nodes[p]!);
      const op: StoredOp = {
        kind: "stored", worker: choice, parent: k > 0 ? nodes[path[k - 1]!]!.engine : null,
        blocks: added.map((b) => ({ hash: b.engine, local: b.local })),
        hashes: added.map((b) => b.engine), locals: added.map((b) => b.local),
      };
      ops.push(op);
      events.push(op);
      st.storedEvents++;
      st.storedBlocks += fresh;
      st.entries += fresh;
      st.maxEntries = Math.max(st.maxEntries, st.entries);
    }
  });

  requestStarts.push(ops.length);
  let drainEvents = 0, drainBlocks = 0;
  caches.forEach((c, w) => {
    if (c.size === 0) return;
    const op: RemovedOp = { kind: "removed", worker: w, hashes: [...c.m.keys()].map((p) => nodes[p]!.engine) };
    ops.push(op);
    events.push(op);
    drainEvents++;
    drainBlocks += op.hashes.length;
  });

  return {
    trace: String(tracePath instanceof URL ? tracePath.pathname : tracePath),
    ops, events, requestStarts,
    stats: {
      requests: trace.length, workers, capacityPerWorker: capacity, split, tokensPerBlock,
      promptBlocks: st.promptBlocks, cachedPromptBlocks: st.cached, hitRatio: st.cached / Math.max(1, st.promptBlocks),
      distinctNodes: nodes.length,
      storedEvents: st.storedEvents, storedBlocks: st.storedBlocks,
      removedEvents: st.removedEvents + drainEvents, removedBlocks: st.removedBlocks + drainBlocks,
      drainEvents, drainBlocks, perWorker, maxIndexEntries: st.maxEntries,
    },
  };
}

/** Blocks an event touches (stored + removed). */
export function eventBlocks(op: EventOp): number {
  return op.kind === "stored" ? op.blocks.length : op.hashes.length;
}
