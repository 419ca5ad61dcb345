/** @module Maps (worker id, dp rank) pairs to the dense slot numbers the WASM index keys its bitmasks by. */
import { KvgateError } from "./errors.ts";

export interface SlotKey {
  worker: string;
  dpRank: number;
}

export class SlotMap {
  readonly #bySlot: (SlotKey | undefined)[];
  readonly #byKey = new Map<string, number>();
  readonly #free: number[] = [];

  constructor(readonly capacity: number) {
    this.#bySlot = new Array(capacity);
    for (let s = capacity - 1; s >= 0; s--) this.#free.push(s);
  }

  static key(worker: string, dpRank: number): string {
    return `${worker}\u0000${dpRank}`;
  }

  get(worker: string, dpRank: number): number | undefined {
    return this.#byKey.get(SlotMap.key(worker, dpRank));
  }

  /** The slot of (worker, rank), allocating one; `fresh` tells whether the core must open it. */
  acquire(worker: string, dpRank: number): { slot: number; fresh: boolean } {
    if (!Number.isInteger(dpRank) || dpRank < 0) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `dp rank must be a non-negative integer, got ${dpRank}`);
    }
    const k = SlotMap.key(worker, dpRank);
    const have = this.#byKey.get(k);
    if (have !== undefined) return { slot: have, fresh: false };
    const slot = this.#free.pop();
    if (slot === undefined) {
      throw new KvgateError("KVGATE_ERR_SLOTS_EXHAUSTED", `all ${this.capacity} worker slots are in use; raise maxSlots`);
    }
    this.#byKey.set(k, slot);
    this.#bySlot[slot] = { worker, dpRank };
    return { slot, fresh: true };
  }

  release(slot: number): void {
    const key = this.#bySlot[slot];
    if (!key) return;
    this.#byKey.delete(SlotMap.key(key.worker, key.dpRank));
    this.#bySlot[slot] = undefined;
    this.#free.push(slot);
  }

  at(slot: number): SlotKey | undefined {
    return this.#bySlot[slot];
  }

  /** Slots of every rank of `worker`. */
  slotsOf(worker: string): number[] {
    const out: number[] = [];
    for (let s = 0; s < this.capacity; s++) if (this.#bySlot[s]?.worker === worker) out.push(s);
    return out;
  }

  *entries(): IterableIterator<[number, SlotKey]> {
    for (let s = 0; s < this.capacity; s++) {
      const k = this.#bySlot[s];
      if (k) yield [s, k];
    }
  }
}
