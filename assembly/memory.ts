// Bump allocation of the fixed regions a KvIndex reserves at creation; the heap never frees, so memory is bounded by configuration.

let top: usize = 0;
let limitPages: i32 = 0;

/** Sets the page budget; regions allocated past it fail instead of growing memory. */
export function setBudget(pages: i32): void {
  limitPages = pages;
  if (top == 0) top = (__heap_base + 15) & ~15;
}

/** Reserves `bytes` zeroed bytes aligned to 16; returns 0 when the budget would be exceeded. */
export function reserve(bytes: usize): usize {
  if (top == 0) top = (__heap_base + 15) & ~15;
  const start = (top + 15) & ~15;
  const end = start + bytes;
  if (end < start) return 0;
  const needPages = <i32>((end + 0xFFFF) >> 16);
  const have = memory.size();
  if (needPages > have) {
    if (limitPages > 0 && needPages > limitPages) return 0;
    if (memory.grow(needPages - have) < 0) return 0;
  }
  top = end;
  memory.fill(start, 0, bytes);
  return start;
}

/** Bytes reserved so far, static data included. */
export function used(): usize {
  return top;
}
