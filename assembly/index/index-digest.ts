// Per-slot digest of what the index holds: how many entries and an order-independent fingerprint of their
// (engine hash, prefix) pairs, so two router replicas can tell whether their indexes agree without shipping them.
import { recAt, tableCount, isLive, R_HASH, R_SEQ, R_SLOT } from "./entry-table";

/** splitmix64's finalizer: a cheap bijective mix, so sums of mixed values do not cancel the way raw sums can. */
// @ts-ignore: decorator
@inline function fmix(x: u64): u64 {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EB;
  return x ^ (x >> 31);
}

/**
 * One walk of the entry table; `out` gets 16 bytes per slot below `slots`: u64 wrapping sum of
 * fmix(hash ^ fmix(seq)) over the slot's live entries, then u32 entry count, then u32 zero.
 */
export function digestSlots(out: usize, slots: i32): void {
  memory.fill(out, 0, <usize>slots << 4);
  const n = tableCount();
  for (let i: u64 = 0; i < n; i++) {
    const r = recAt(i);
    if (!isLive(r)) continue;
    const slot = load<u32>(r, R_SLOT);
    if (slot >= <u32>slots) continue;
    const p = out + (<usize>slot << 4);
    store<u64>(p, load<u64>(p) + fmix(load<u64>(r, R_HASH) ^ fmix(load<u64>(r, R_SEQ))));
    store<u32>(p, load<u32>(p, 8) + 1, 8);
  }
}
