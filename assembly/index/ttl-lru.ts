// Approximate mode's recency order per slot: a doubly linked list of each slot's timers, so a slot given a capacity
// (learnt from the engine's reported hits) drops its least recently routed blocks first, as the engine's LRU does.

// Per timer id (16 bytes): previous id + 1 u32 | next id + 1 u32 (0 = none) | stamp u32 | unused u32. The stamp sits
// with the links so reading a block's age warms the line the touch that follows moves.
let links: usize = 0;
// Per slot (16 bytes): head (least recent) id + 1 u32 | tail id + 1 u32 | timers u32 | capacity u32 (0 = none)
let lists: usize = 0;
// Recency as a count (the closed loop bounds an engine's cache by how long ago a block it missed was routed): per slot
// a u32 clock that ticks once per block a routed prompt touches, per timer the clock when its block was last touched.
// Ages are wrapping differences: exact while fewer than 2^32 blocks are routed to a slot within one block's lifetime.
let clocks: usize = 0;

export function lruInit(linkBase: usize, listBase: usize, clockBase: usize, slots: i32): void {
  links = linkBase;
  lists = listBase;
  clocks = clockBase;
  memory.fill(listBase, 0, <usize>slots << 4);
  memory.fill(clockBase, 0, <usize>slots << 2);
}

/** The slot's clock: blocks touched by prompts routed to it so far (wrapping). */
export function lruClock(slot: i32): u32 {
  return load<u32>(clocks + (<usize>slot << 2));
}

/** Touches routed to the slot since timer `id`'s block was last touched. */
export function lruAge(slot: i32, id: u32): u32 {
  return lruClock(slot) - load<u32>(link(id), 8);
}

// @ts-ignore: decorator
@inline function link(id: u32): usize { return links + (<usize>id << 4); }

/** Timer `id`'s link record: freeing the timer reads it (and its neighbours'). */
export function lruLink(id: u32): usize {
  return link(id);
}
// @ts-ignore: decorator
@inline function list(slot: i32): usize { return lists + (<usize>slot << 4); }

function unlink(slot: i32, id: u32): void {
  const l = list(slot), me = link(id);
  const prev = load<u32>(me), next = load<u32>(me, 4);
  if (prev != 0) store<u32>(link(prev - 1), next, 4);
  else store<u32>(l, next);
  if (next != 0) store<u32>(link(next - 1), prev);
  else store<u32>(l, prev, 4);
}

function append(slot: i32, id: u32): void {
  const l = list(slot), me = link(id);
  const tail = load<u32>(l, 4);
  store<u32>(me, tail);
  store<u32>(me, 0, 4);
  if (tail != 0) store<u32>(link(tail - 1), id + 1, 4);
  else store<u32>(l, id + 1);
  store<u32>(l, id + 1, 4);
}

/** A new timer of `slot` is its most recent (stamped with the clock as it is: the touch that follows ticks it). */
export function lruAdd(slot: i32, id: u32): void {
  append(slot, id);
  store<u32>(link(id), lruClock(slot), 8);
  store<u32>(list(slot), load<u32>(list(slot), 8) + 1, 8);
}

export function lruRemove(slot: i32, id: u32): void {
  unlink(slot, id);
  store<u32>(list(slot), load<u32>(list(slot), 8) - 1, 8);
}

/**
 * Timer `id`'s last touch is unknown (restored from a snapshot): it reads as 2^31 touches old, so a miss on it bounds
 * no cache until a prompt routed here touches it again.
 */
export function lruUnknown(slot: i32, id: u32): void {
  store<u32>(link(id), lruClock(slot) + 0x80000000, 8);
}

/** Makes timer `id` (already in `slot`'s list) the slot's most recent; the slot's clock ticks. */
export function lruTouch(slot: i32, id: u32): void {
  const c = clocks + (<usize>slot << 2);
  const now = load<u32>(c) + 1;
  store<u32>(c, now);
  store<u32>(link(id), now, 8);
  if (load<u32>(list(slot), 4) == id + 1) return;
  unlink(slot, id);
  append(slot, id);
}

/** The slot's least recent timer, or -1 when it has none. */
export function lruOldest(slot: i32): i32 {
  return <i32>load<u32>(list(slot)) - 1;
}

export function lruCount(slot: i32): u32 {
  return load<u32>(list(slot), 8);
}

export function lruCapacity(slot: i32): u32 {
  return load<u32>(list(slot), 12);
}

export function lruSetCapacity(slot: i32, capacity: u32): void {
  store<u32>(list(slot), capacity, 12);
}
