/**
 * @module The last N routing decisions with their candidates tables, kept in memory for GET /v1/stats and the
 * dashboard (`gw.decisions.recent(n)`). A fixed array used as a ring: memory is N records whatever the traffic.
 */
import type { DecisionRecord, DecisionSink } from "../routing/index.ts";

export class DecisionRing implements DecisionSink {
  readonly detail = "candidates" as const;
  readonly #slots: (DecisionRecord | undefined)[];
  #next = 0;
  #total = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 0) throw new RangeError(`decision ring capacity must be a non-negative integer, got ${capacity}`);
    this.#slots = new Array<DecisionRecord | undefined>(capacity).fill(undefined);
  }

  /** Decisions seen since start (the ring holds the last `capacity` of them). */
  get total(): number {
    return this.#total;
  }

  get size(): number {
    return Math.min(this.#total, this.capacity);
  }

  decided(record: DecisionRecord): void {
    this.#total++;
    if (this.capacity === 0) return;
    // The decision log's replay inputs (hashes, tokens) would make a record 10–100× larger: the ring keeps the table.
    this.#slots[this.#next] = record.inputs ? withoutInputs(record) : record;
    this.#next = (this.#next + 1) % this.capacity;
  }

  /** The last `n` decisions (all held when n is omitted), newest first. */
  recent(n = this.capacity): DecisionRecord[] {
    const k = Math.max(0, Math.min(Math.floor(n), this.size));
    const out = new Array<DecisionRecord>(k);
    for (let i = 0; i < k; i++) out[i] = this.#slots[(this.#next - 1 - i + this.capacity) % this.capacity]!;
    return out;
  }
}

function withoutInputs(r: DecisionRecord): DecisionRecord {
  const { inputs: _dropped, ...rest } = r;
  return rest;
}
