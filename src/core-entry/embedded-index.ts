/**
 * @module The index as kvgate/core hands it to embedders: KvIndex plus, as methods, the per-event and object-form
 * operations the router itself never calls (src/core/index-operations.ts), so the router's class stays lean.
 */
import type { HashOptions } from "../core/hash-seeds.ts";
import {
  cleared, findMatches, findMatchesByHashes, recordHashes, removed, stored, treeSize,
  type OverlapScores, type StoredBlock, type StoreOutcome,
} from "../core/index-operations.ts";
import { KvIndex } from "../core/kv-index.ts";

export class EmbeddedIndex extends KvIndex {
  /** Overlap of a prompt with every (worker, rank), as objects. */
  findMatches(tokens: ArrayLike<number>, opts: HashOptions): OverlapScores {
    return findMatches(this, tokens, opts);
  }

  /** The same from sequence hashes the host computed (position i = depth i). */
  findMatchesByHashes(seq: ArrayLike<bigint>): OverlapScores {
    return findMatchesByHashes(this, seq);
  }

  /** A BlockStored: `blocks` chain from `parent` (an engine hash, or null for a root). */
  stored(worker: string, dpRank: number, parent: bigint | null, blocks: readonly StoredBlock[]): StoreOutcome {
    return stored(this, worker, dpRank, parent, blocks);
  }

  /** A BlockRemoved by engine hashes; returns how many were unknown. */
  removed(worker: string, dpRank: number, hashes: readonly bigint[]): number {
    return removed(this, worker, dpRank, hashes);
  }

  /** AllBlocksCleared for every rank of the worker. */
  cleared(worker: string): void {
    cleared(this, worker);
  }

  /** Approximate mode: records that the router sent a prompt with these sequence hashes to (worker, rank). */
  recordHashes(worker: string, dpRank: number, seq: ArrayLike<bigint>, now: number, ttlMs?: number): number {
    return recordHashes(this, worker, dpRank, seq, now, ttlMs);
  }

  /** Blocks (worker, rank) holds; 0 for an unknown pair. */
  treeSize(worker: string, dpRank = 0): number {
    return treeSize(this, worker, dpRank);
  }
}
