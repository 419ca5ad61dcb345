// Writes decoded engine events as kvgate binary event records (format in src/core/event-encoder.ts) into the
// ingest output region, splitting and merging records exactly as src/events/binary-batch-builder.ts does, so the
// in-core decoder and the TypeScript one produce the same bytes for the same batch. Slots are written as 0 and set
// when the batch is applied (the dp rank comes after the events). Scratch space for the event being decoded is taken
// from the top of the same region, so a batch fails over to the TypeScript path only when the two would meet.
import { K_STORED_TOKENS, K_REMOVED, K_CLEARED } from "./event-batch";
import { fail, S_FULL } from "./msgpack";

const HEADER: usize = 16;

let base: usize = 0;
let top: usize = 0;
/** Next record byte. */
export let tail: usize = 0;
/** Lowest byte of scratch in use by the current event; records must stay below it. */
let scratchLow: usize = 0;
/** The last record written (0: none yet); a Removed run is appended to it. */
let lastRec: usize = 0;
export let records: u32 = 0;
/** Bytes one applyBatch call takes and blocks one record carries (KvIndex eventBytes, eventBlocks). */
let maxBytes: i64 = 0;
let maxBlocks: i64 = 0;

export function writerInit(region: usize, bytes: usize, eventBytes: i32, eventBlocks: i32): void {
  base = region;
  top = region + bytes;
  maxBytes = eventBytes;
  maxBlocks = eventBlocks;
}

export function writerReset(): void {
  tail = base;
  scratchLow = top;
  lastRec = 0;
  records = 0;
}

export function writtenBytes(): usize {
  return tail - base;
}

/** Releases the previous event's scratch. */
export function scratchReset(): void {
  scratchLow = top;
}

/** `bytes` of scratch (8-aligned) below the scratch in use; 0 with S_FULL when records and scratch would meet. */
export function scratch(bytes: u64): usize {
  const room = <u64>(scratchLow - tail);
  if (bytes + 8 > room) { fail(S_FULL); return 0; }
  scratchLow = (scratchLow - <usize>bytes) & ~(<usize>7);
  return scratchLow;
}

/** Appends a record header; returns the offset of its body, or 0 with S_FULL. */
function header(kind: u32, hasParent: bool, count: u32, aux: u32, body: u64): usize {
  if (<u64>HEADER + body > <u64>(scratchLow - tail)) { fail(S_FULL); return 0; }
  const r = tail;
  store<u32>(r, kind | (hasParent ? 0x100 : 0));
  store<u32>(r, 0, 4);
  store<u32>(r, count, 8);
  store<u32>(r, aux, 12);
  lastRec = r;
  records++;
  tail = r + HEADER + <usize>body;
  return r + HEADER;
}

/** Blocks of `bs` tokens one stored-tokens record carries (at least one, however small eventBytes is). */
function storedPerRecord(bs: u32): i64 {
  const per = min<i64>((maxBytes - 40) / (8 + 4 * <i64>bs), maxBlocks);
  return per < 1 ? 1 : per;
}

/**
 * Where the `nTokens` token ids of a BlockStored event of `n` blocks of `bs` tokens go when they can be read straight
 * into the single record storedTokens would write for it (most events: it then copies only the hashes); 0 when the
 * event needs several records or the room is short, and the ids go to scratch. Nothing is committed: an event the
 * policy drops leaves them past `tail`, where the next record overwrites them. Scratch the event takes afterwards (a
 * repeated key) may reach into them only when it also leaves no room for the record, which header() then refuses.
 */
export function tokensInPlace(n: u32, nTokens: u32, bs: u32): usize {
  if (n == 0 || <u64>nTokens != <u64>n * bs) return 0;
  if (<i64>n > storedPerRecord(bs)) return 0;
  const at = tail + HEADER + 16 + (<usize>n << 3);
  const bytes = (<u64>nTokens + 1) << 2;
  if (<u64>at + bytes > <u64>scratchLow) return 0;
  return at;
}

/**
 * Stored blocks by token ids: `n` engine hashes (u64) at `hashes`, n·bs token ids (u32) at `tokens`. Split into
 * records the core can take, each next one chained to the previous record's last hash.
 */
export function storedTokens(hasParent: bool, parent: u64, hashes: usize, n: u32, tokens: usize, bs: u32, seed: u64): void {
  const per = storedPerRecord(bs);
  let hp = hasParent;
  let p = hasParent ? parent : 0;
  for (let from: u32 = 0; from < n; from += <u32>per) {
    const k = min<u32>(<u32>per, n - from);
    const words = <u64>k * bs;
    const tokenWords = words + (words & 1);
    const b = header(K_STORED_TOKENS, hp, k, bs, 16 + 8 * <u64>k + 4 * tokenWords);
    if (b == 0) return;
    store<u64>(b, p);
    store<u64>(b, seed, 8);
    copyWords(b + 16, hashes + (<usize>from << 3), k);
    const t = b + 16 + (<usize>k << 3);
    copyBytes(t, tokens + <usize>(<u64>from * bs * 4), <usize>(words << 2));
    if (tokenWords != words) store<u32>(t + <usize>(words << 2), 0);
    p = load<u64>(hashes + (<usize>(from + k - 1) << 3));
    hp = true;
  }
}

/**
 * Removed blocks. A run of Removed events (vLLM sends one per evicted block) becomes one record: the core applies a
 * record's hashes in order, so appending to the previous Removed record is the same as a record per event.
 */
export function removed(hashes: usize, n: u32): void {
  let from: u32 = 0;
  if (lastRec != 0 && load<u32>(lastRec) == <u32>K_REMOVED) {
    const room = maxBytes - <i64>(tail - lastRec);
    const k = room > 0 ? <u32>min<i64>(<i64>n, room / 8) : 0;
    if (k > 0) {
      const bytes = <usize>k << 3;
      if (<u64>bytes > <u64>(scratchLow - tail)) { fail(S_FULL); return; }
      copyWords(tail, hashes, k);
      store<u32>(lastRec, load<u32>(lastRec, 8) + k, 8);
      tail += bytes;
      from = k;
    }
  }
  let per = (maxBytes - 16) / 8;
  if (per < 1) per = 1;
  for (; from < n; from += <u32>per) {
    const k = min<u32>(<u32>per, n - from);
    const b = header(K_REMOVED, false, k, 0, 8 * <u64>k);
    if (b == 0) return;
    copyWords(b, hashes + (<usize>from << 3), k);
  }
}

/** `n` bytes (a multiple of 4) with u64 moves; none when they are in place already (tokensInPlace). */
function copyBytes(dst: usize, src: usize, n: usize): void {
  if (dst == src) return;
  let i: usize = 0;
  for (; i + 8 <= n; i += 8) store<u64>(dst + i, load<u64>(src + i));
  if (i < n) store<u32>(dst + i, load<u32>(src + i));
}

/** `n` u64 words; a loop for the short runs of one engine event (memory.copy is a runtime call in V8). */
// @ts-ignore: decorator
@inline function copyWords(dst: usize, src: usize, n: u32): void {
  if (n > 16) { memory.copy(dst, src, <usize>n << 3); return; }
  for (let i: usize = 0; i < <usize>n; i++) store<u64>(dst + (i << 3), load<u64>(src + (i << 3)));
}

/** One Removed hash, appended to the previous Removed record when it has room (the common case, inline). */
export function removedOne(h: u64): void {
  if (lastRec != 0 && load<u32>(lastRec) == <u32>K_REMOVED && maxBytes - <i64>(tail - lastRec) >= 8 && tail + 8 <= scratchLow) {
    store<u64>(tail, h);
    store<u32>(lastRec, load<u32>(lastRec, 8) + 1, 8);
    tail += 8;
    return;
  }
  scratchLow = top;
  const s = scratch(8);
  if (s == 0) return;
  store<u64>(s, h);
  removed(s, 1);
}

export function cleared(): void {
  header(K_CLEARED, false, 0, 0, 0);
}

/** Sets the slot of every record of `len` bytes at `p` (written by this module, hence well formed). */
export function setSlots(p: usize, len: usize, slot: i32): void {
  let off: usize = 0;
  while (off + HEADER <= len) {
    const r = p + off;
    store<i32>(r, slot, 4);
    const kind = load<u8>(r);
    const n = <usize>load<u32>(r, 8);
    if (kind == K_REMOVED) off += HEADER + (n << 3);
    else if (kind == K_STORED_TOKENS) off += HEADER + 16 + (n << 3) + ((n * <usize>load<u32>(r, 12) * 4 + 7) & ~(<usize>7));
    else off += HEADER;
  }
}
