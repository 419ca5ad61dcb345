/**
 * @module KvIndex operations the router does not use but embedders, tests and benchmarks do (per-event calls, matches
 * as objects, phase-split access), over the index's public pieces so its hot class carries none of them.
 */
import { Status, type CoreExports } from "../wasm/abi.ts";
import { growPrompt, statusError, type HashOptions, type KvIndex } from "./kv-index.ts";
import type { SlotKey } from "./slot-map.ts";

export interface BlockMatch extends SlotKey {
  /** Contiguous leading blocks of the prompt the slot holds. */
  blocks: number;
  /** Blocks the slot holds in the index (tie-breaker). */
  treeSize: number;
}

export interface OverlapScores {
  /** Complete blocks in the prompt. */
  blocks: number;
  matches: BlockMatch[];
}

export type StoreOutcome = "applied" | "parent_not_found" | "invalid_sequence" | "capacity";

export interface StoredBlock {
  /** The engine's block hash: an opaque id used by later Removed events and as the parent of the next Stored. */
  hash: bigint;
  /** The router's local (content) hash of the block's tokens. */
  local: bigint;
}

interface Views {
  buffer: ArrayBuffer | SharedArrayBuffer;
  u32: Uint32Array;
  u64: BigUint64Array;
}

let views: Views | undefined;

/** Views of the core's memory, made again only when it was replaced (timed bench loops call these helpers). */
export function memory(c: CoreExports): Views {
  const buffer = c.memory.buffer;
  if (views?.buffer !== buffer) views = { buffer, u32: new Uint32Array(buffer), u64: new BigUint64Array(buffer) };
  return views;
}

/** Writes sequence hashes into the core's sequence region, growing the prompt regions when they are too small. */
function loadSequence(index: KvIndex, c: CoreExports, seq: ArrayLike<bigint>): void {
  if (seq.length > c.blocks_cap()) growPrompt(c, seq.length, index.options.maxPromptTokens);
  const u64 = memory(c).u64, sp = c.seq_ptr() >>> 3;
  for (let i = 0; i < seq.length; i++) u64[sp + i] = BigInt.asUintN(64, seq[i]!);
}

/** The `n` pairs of the last match as objects; its own core call, so the index's views are fresh after a growth. */
function collect(index: KvIndex, n: number): BlockMatch[] {
  return index.withCore("matches", () => {
    const out: BlockMatch[] = [];
    for (let i = 0; i < n; i++) {
      const slot = index.matches.slot(i);
      const key = index.slots.at(slot);
      if (key) out.push({ ...key, blocks: index.matches.depth(i), treeSize: index.treeSizeOfSlot(slot) });
    }
    return out;
  });
}

/** Overlap of a prompt with every slot, as objects (the friendly form of `route`). */
export function findMatches(index: KvIndex, tokens: ArrayLike<number>, opts: HashOptions): OverlapScores {
  const n = index.route(tokens, opts);
  return { blocks: index.lastBlocks, matches: collect(index, n) };
}

/** Overlap for already-computed sequence hashes. */
export function findMatchesByHashes(index: KvIndex, seq: ArrayLike<bigint>): OverlapScores {
  const n = index.withCore("find_matches", (c) => {
    loadSequence(index, c, seq);
    const r = c.find_matches(seq.length);
    if (r < 0) throw statusError(r, "find_matches");
    return r;
  });
  return { blocks: seq.length, matches: collect(index, n) };
}

/** Hashes the prompt only and returns its block count; `matchLast` then matches it (the two phases timed apart). */
export function hashOnly(index: KvIndex, tokens: ArrayLike<number>, opts: HashOptions): number {
  return index.hash(tokens, opts).seq.length;
}

/** Matches the last hashed prompt; same result form as `route` (read the pairs through `index.matches`). */
export function matchLast(index: KvIndex): number {
  return index.withCore("find_matches", (c) => {
    const n = c.find_matches(c.last_blocks());
    if (n < 0) throw statusError(n, "find_matches");
    return n;
  });
}

/** Blocks (worker, rank) holds in the index; 0 for an unknown pair. */
export function treeSize(index: KvIndex, worker: string, dpRank = 0): number {
  const slot = index.slots.get(worker, dpRank);
  return slot === undefined ? 0 : index.treeSizeOfSlot(slot);
}

/** Applies a Stored event: blocks extend `parent` (an engine hash of the same worker rank) or start a prompt. */
export function stored(index: KvIndex, worker: string, dpRank: number, parent: bigint | null, blocks: readonly StoredBlock[]): StoreOutcome {
  const slot = index.slotFor(worker, dpRank);
  return index.withCore("store_blocks", (c) => {
    const cap = c.io_cap();
    const u64 = memory(c).u64;
    let outcome: StoreOutcome = "applied";
    for (let start = 0; start < blocks.length || start === 0; start += cap) {
      const part = blocks.slice(start, start + cap);
      const p = start === 0 ? parent : blocks[start - 1]!.hash;
      const io = c.io_ptr() >>> 3;
      for (let i = 0; i < part.length; i++) {
        u64[io + 2 * i] = BigInt.asUintN(64, part[i]!.hash);
        u64[io + 2 * i + 1] = BigInt.asUintN(64, part[i]!.local);
      }
      const pv = p === null ? 0n : BigInt.asUintN(64, p);
      const st = c.store_blocks(slot, p === null ? 0 : 1, Number(pv & 0xffffffffn) | 0, Number(pv >> 32n) | 0, part.length);
      outcome = storeOutcome(st);
      if (outcome !== "applied" || blocks.length === 0) break;
    }
    return outcome;
  });
}

/** Applies a Removed event; returns how many hashes the index did not know (they are skipped). */
export function removed(index: KvIndex, worker: string, dpRank: number, hashes: readonly bigint[]): number {
  const slot = index.slots.get(worker, dpRank);
  if (slot === undefined) return hashes.length;
  return index.withCore("remove_blocks", (c) => {
    const cap = 2 * c.io_cap();
    const u64 = memory(c).u64;
    let unknown = 0;
    for (let start = 0; start < hashes.length; start += cap) {
      const part = hashes.slice(start, start + cap);
      const io = c.io_ptr() >>> 3;
      for (let i = 0; i < part.length; i++) u64[io + i] = BigInt.asUintN(64, part[i]!);
      const st = c.remove_blocks(slot, part.length);
      if (st < 0) throw statusError(st, "remove_blocks");
      unknown += st;
    }
    return unknown;
  });
}

/** Applies a Cleared event: every block of every rank of `worker`; the worker stays known. */
export function cleared(index: KvIndex, worker: string): void {
  for (const slot of index.slots.slotsOf(worker)) index.withCore("clear_slot", (c) => c.clear_slot(slot));
}

/** Approximate mode with explicit sequence hashes (position i = depth i). */
export function recordHashes(index: KvIndex, worker: string, dpRank: number, seq: ArrayLike<bigint>, now: number,
  ttlMs = index.options.approxTtlMs): number {
  const slot = index.slotFor(worker, dpRank);
  return index.withCore("record_route", (c) => {
    loadSequence(index, c, seq);
    const r = c.record_route(slot, seq.length, now, ttlMs);
    if (r < 0) throw statusError(r, "record_route");
    return r;
  });
}

function storeOutcome(st: number): StoreOutcome {
  switch (st) {
    case Status.OK: return "applied";
    case Status.PARENT_NOT_FOUND: return "parent_not_found";
    case Status.INVALID_SEQUENCE: return "invalid_sequence";
    case Status.CAPACITY: return "capacity";
    default: throw statusError(st, "store_blocks");
  }
}

/** What one (worker, rank) holds, as an order-independent fingerprint (assembly/index/index-digest.ts). */
export interface SlotDigest extends SlotKey {
  /** Entries the slot holds (engine blocks, plus approximate-mode records). */
  blocks: number;
  /** Wrapping u64 sum of fmix(hash ^ fmix(prefix)) over the entries, 16 hex digits; equal sets give equal digests. */
  digest: string;
}

/** Every live slot's digest in one walk of the core's entry table (O(table), meant for admin calls, not the hot path). */
export function indexDigest(index: KvIndex): SlotDigest[] {
  return index.withCore("index_digest", (c) => {
    const n = c.index_digest();
    if (n < 0) throw statusError(n, "index_digest");
    const { u32, u64 } = memory(c);
    const base = c.digest_ptr();
    const out: SlotDigest[] = [];
    for (const [slot, key] of index.slots.entries()) {
      if (slot >= n) continue;
      const at = base + slot * 16;
      out.push({ ...key, blocks: u32[(at + 8) >>> 2]!, digest: u64[at >>> 3]!.toString(16).padStart(16, "0") });
    }
    return out;
  });
}
