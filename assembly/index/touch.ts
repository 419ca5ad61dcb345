// Cache warming for event application: WASM has no prefetch instruction, so a run of independent loads whose values
// only feed a sink makes the CPU overlap the cache and TLB misses of a whole run of blocks before the dependent work.

/** Blocks warmed at a time: a removal's entry and node misses of 32 blocks overlap (16 left the second wait exposed). */
// @ts-ignore: decorator
@inline export const TOUCH_RUN: i32 = 32;

const SINK: usize = memory.data(8, 8);

/** The word at `p`, for a caller that XORs a run of them and hands the result to `settle`. */
// @ts-ignore: decorator
@inline export function touch(p: usize): u64 {
  return load<u64>(p);
}

/** Stores a run's XORed touches to memory, so no optimizer may treat the touching loads as dead. */
// @ts-ignore: decorator
@inline export function settle(warm: u64): void {
  store<u64>(SINK, warm);
}
