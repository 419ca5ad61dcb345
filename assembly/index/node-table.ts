// Flat open-addressing map from a prompt-prefix sequence hash to the bitmask of worker slots holding that prefix.
// A record is [seq u64 | mask u64 × words]; an all-zero mask marks an empty record, so no hash value is reserved.
import { copyWords, zeroWords } from "./record-moves";

export let nodeBase: usize = 0;
export let nodeMask: u64 = 0; // record count - 1 (power of two)
export let nodeShift: u64 = 0; // 64 - log2(record count)
export let words: i32 = 1;
export let stride: usize = 16;
export let salt: u64 = 0x9E3779B97F4A7C15;
export let liveNodes: i32 = 0;

/** Configures the table over a zeroed region of `count` records (a power of two). */
export function nodeInit(base: usize, count: u64, maskWords: i32, saltOdd: u64): void {
  nodeBase = base;
  nodeMask = count - 1;
  nodeShift = 64 - <u64>ctz<u64>(count);
  words = maskWords;
  stride = 8 + (<usize>maskWords << 3);
  salt = saltOdd | 1;
  liveNodes = 0;
}

export function nodeBytes(count: u64, maskWords: i32): usize {
  return <usize>count * (8 + (<usize>maskWords << 3));
}

// Multiplicative hashing with a per-process odd salt: keys are XXH3 with a public seed, so an attacker could
// otherwise craft prompts whose hashes share one probe chain.
// @ts-ignore: decorator
@inline export function home(key: u64): u64 {
  return (key * salt) >> nodeShift;
}

// @ts-ignore: decorator
@inline export function recAt(i: u64): usize {
  return nodeBase + <usize>i * stride;
}

/** Where the probe for `seq` starts: what `touch` warms before a run of lookups. */
// @ts-ignore: decorator
@inline export function nodeHome(seq: u64): usize {
  return recAt(home(seq));
}

/** The record after the home: deleting a node reads it (backward shift), and it may start the next line. */
// @ts-ignore: decorator
@inline export function nodeAfterHome(seq: u64): usize {
  return recAt((home(seq) + 1) & nodeMask);
}

// @ts-ignore: decorator
@inline export function isEmpty(r: usize): bool {
  if (words == 1) return load<u64>(r, 8) == 0;
  for (let w = 0; w < words; w++) if (load<u64>(r + 8 + (<usize>w << 3)) != 0) return false;
  return true;
}

/** Record address for `seq`, or 0 when no slot holds it. */
export function nodeFind(seq: u64): usize {
  let i = home(seq);
  while (true) {
    const r = recAt(i);
    if (isEmpty(r)) return 0;
    if (load<u64>(r) == seq) return r;
    i = (i + 1) & nodeMask;
  }
  return 0;
}

/** Sets bit `slot` on the record for `seq`, creating it; returns true when the bit was already set. */
export function nodeSetBit(seq: u64, slot: i32): bool {
  let i = home(seq);
  const wordOff: usize = 8 + (<usize>(slot >> 6) << 3);
  const bit: u64 = (<u64>1) << <u64>(slot & 63);
  while (true) {
    const r = recAt(i);
    if (isEmpty(r)) {
      store<u64>(r, seq);
      store<u64>(r + wordOff, bit);
      liveNodes++;
      return false;
    }
    if (load<u64>(r) == seq) {
      const m = load<u64>(r + wordOff);
      store<u64>(r + wordOff, m | bit);
      return (m & bit) != 0;
    }
    i = (i + 1) & nodeMask;
  }
  return false;
}

/** Clears bit `slot` of `seq`; deletes the record (backward shift) when no slot is left. */
export function nodeClearBit(seq: u64, slot: i32): void {
  const r = nodeFind(seq);
  if (r == 0) return;
  const wordOff: usize = 8 + (<usize>(slot >> 6) << 3);
  store<u64>(r + wordOff, load<u64>(r + wordOff) & ~((<u64>1) << <u64>(slot & 63)));
  // One mask word makes the record 16 bytes: a shift instead of a 64-bit division on every removal.
  if (isEmpty(r)) deleteAt(words == 1 ? <u64>((r - nodeBase) >> 4) : <u64>((r - nodeBase) / stride));
}

function deleteAt(hole: u64): void {
  liveNodes--;
  let i = hole;
  let j = hole;
  while (true) {
    j = (j + 1) & nodeMask;
    const rj = recAt(j);
    if (isEmpty(rj)) break;
    const k = home(load<u64>(rj));
    // Move j into the hole unless its home lies cyclically in (i, j].
    const stay = i <= j ? (k > i && k <= j) : (k > i || k <= j);
    if (!stay) {
      copyWords(recAt(i), rj, words + 1);
      i = j;
    }
  }
  zeroWords(recAt(i), words + 1);
}
