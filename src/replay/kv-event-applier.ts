/**
 * @module Feeds engines' KV events (vLLM msgpack batches, as the simulated engines publish them) into a router's
 * KvIndex, so the "KV with events" policy routes on what the engines really cache. Used when the replay runs the
 * router in-process; a gateway that ingests events itself does the same at its events endpoint.
 */
import type { KvIndex } from "../core/kv-index.ts";
import { decodeKvEventBatch } from "../sim/kv-event-decode.ts";
import type { EncodedKvBatch } from "../sim/kv-event-sink.ts";

export interface ApplierStats {
  batches: number;
  events: number;
  storedBlocks: number;
  removedBlocks: number;
  cleared: number;
  /** Stored events the index refused (unknown parent, capacity, invalid sequence). */
  refused: number;
  /** Removed hashes the index did not know. */
  unknownRemoved: number;
  /** Batches missing from a publisher's sequence (0 in-process; nonzero means the index may be stale). */
  gaps: number;
}

export class KvEventApplier {
  readonly stats: ApplierStats = { batches: 0, events: 0, storedBlocks: 0, removedBlocks: 0, cleared: 0, refused: 0, unknownRemoved: 0, gaps: 0 };
  readonly #nextSeq = new Map<string, number>();

  constructor(private readonly index: KvIndex) {}

  apply(batch: EncodedKvBatch): void {
    const key = `${batch.workerId}\u0000${batch.dpRank}`;
    const expected = this.#nextSeq.get(key) ?? 0;
    if (batch.seq > expected) this.stats.gaps += batch.seq - expected;
    this.#nextSeq.set(key, batch.seq + 1);
    const decoded = decodeKvEventBatch(batch.bytes);
    const rank = decoded.data_parallel_rank ?? batch.dpRank;
    this.stats.batches++;
    for (const e of decoded.events) {
      this.stats.events++;
      switch (e.type) {
        case "BlockStored": {
          // The index keys blocks by the router's own content hash; the engine's hash is kept as the block's id.
          const local = this.index.hash(e.token_ids, { blockSize: e.block_size }).local;
          const blocks = e.block_hashes.map((hash, i) => ({ hash, local: local[i]! }));
          if (this.index.stored(batch.workerId, rank, e.parent_block_hash, blocks) === "applied") this.stats.storedBlocks += blocks.length;
          else this.stats.refused++;
          break;
        }
        case "BlockRemoved":
          this.stats.removedBlocks += e.block_hashes.length;
          this.stats.unknownRemoved += this.index.removed(batch.workerId, rank, e.block_hashes);
          break;
        case "AllBlocksCleared":
          this.stats.cleared++;
          this.index.cleared(batch.workerId);
      }
    }
  }
}
