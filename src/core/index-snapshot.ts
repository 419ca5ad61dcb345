/**
 * @module The index's contents out and back in (warm restarts of router replicas): every live entry as a 32-byte record
 * keyed by slot, with the slot → (worker, rank) table, so a fresh instance with other slot numbers can take them in.
 */
import { KvgateError } from "./errors.ts";
import { statusError, type KvIndex } from "./kv-index.ts";
import type { SlotKey } from "./slot-map.ts";

/** Bytes per entry record (assembly/index/entry-dump.ts). */
export const ENTRY_RECORD_BYTES = 32;

export interface IndexDump {
  /** The (worker, rank) of each slot number the records use. */
  slots: (SlotKey & { slot: number })[];
  /** Records: engine hash u64, prefix u64, slot u32, depth u32, TTL left in ms f64 (0: no TTL), little-endian. */
  records: Uint8Array;
}

export interface DumpLoadResult {
  loaded: number;
  /** Records of workers the caller did not accept, of (slot, hash) pairs already held, or beyond capacity. */
  skipped: number;
}

/** Every live entry, TTLs as time left at `now`; at most the index's capacity in records. */
export function dumpIndex(index: KvIndex, now: number): IndexDump {
  const slots = [...index.slots.entries()].map(([slot, key]) => ({ slot, worker: key.worker, dpRank: key.dpRank }));
  const records = index.withCore("dump_entries", (c) => {
    const cap = c.dump_cap();
    const parts: Uint8Array[] = [];
    let total = 0;
    let cursor = 0;
    for (;;) {
      const n = c.dump_entries(cursor, cap, now);
      if (n < 0) throw statusError(n, "dump_entries");
      if (n > 0) {
        parts.push(new Uint8Array(c.memory.buffer, c.io_ptr(), n * ENTRY_RECORD_BYTES).slice());
        total += n;
      }
      const next = Number(new BigUint64Array(c.memory.buffer, c.result_ptr(), 1)[0]!);
      if (n < cap || next <= cursor) break;
      cursor = next;
    }
    const out = new Uint8Array(total * ENTRY_RECORD_BYTES);
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  });
  return { slots, records };
}

/**
 * Takes a dump's records in, slot numbers mapped through its slot table to this index's slots for the workers `accept`
 * admits (opening their slots); others are skipped. TTLs run again from `now`. Entries already held are kept.
 */
export function loadIndexDump(index: KvIndex, dump: IndexDump, now: number, accept: (worker: string, dpRank: number) => boolean): DumpLoadResult {
  if (dump.records.length % ENTRY_RECORD_BYTES !== 0) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `index dump of ${dump.records.length} bytes is not a whole number of records`);
  }
  // Old slot number → this index's slot, -1 for workers not taken.
  const map = new Int32Array(dump.slots.reduce((m, x) => Math.max(m, x.slot + 1), 0)).fill(-1);
  for (const s of dump.slots) if (accept(s.worker, s.dpRank)) map[s.slot] = index.slotFor(s.worker, s.dpRank);
  const total = dump.records.length / ENTRY_RECORD_BYTES;
  const recs = dump.records;
  const src = recs.byteOffset % 4 === 0 ? new Uint32Array(recs.buffer, recs.byteOffset, recs.length >>> 2)
    : new Uint32Array(new Uint8Array(recs).buffer);
  const W = ENTRY_RECORD_BYTES >>> 2;
  const slotOf = (old: number): number => (old < map.length ? map[old]! : -1);
  let loaded = 0;
  index.withCore("load_entries", (c) => {
    const cap = c.dump_cap();
    for (let i = 0; i < total; i += cap) {
      const k = Math.min(cap, total - i);
      const io = new Uint32Array(c.memory.buffer, c.io_ptr(), cap * W);
      // A whole chunk in one copy, slots rewritten in place; records of workers not taken are squeezed out.
      io.set(src.subarray(i * W, (i + k) * W));
      let n = 0;
      for (let j = 0; j < k; j++) {
        const slot = slotOf(io[j * W + 4]!);
        if (slot < 0) continue;
        if (n !== j) io.copyWithin(n * W, j * W, (j + 1) * W);
        io[n * W + 4] = slot;
        n++;
      }
      if (n === 0) continue;
      const r = c.load_entries(n, now);
      if (r < 0) throw statusError(r, "load_entries");
      loaded += r;
    }
  });
  return { loaded, skipped: total - loaded };
}
