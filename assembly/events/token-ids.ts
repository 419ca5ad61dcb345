// Token ids of a BlockStored event, the bulk of an engine batch: decoded into u32s with the widths msgspec uses for
// vocabularies (fixint, uint8, uint16, uint32) read inline, and every other encoding through the checked reader
// with the TypeScript decoder's rules (non-negative, at most 2^32 - 1).
import { pos, end, st, fail, readUint, S_OK, S_CORRUPT } from "./msgpack";

/** Reads `n` token ids at the cursor into `out` (u32 each). */
export function readTokens(out: usize, n: u32): void {
  let p = pos;
  const e = end;
  let i: u32 = 0;
  // Runs of ids that fit in the bytes left even at the widest fast form (5 bytes) are read without bounds checks,
  // one length check per run rather than per id; uint16 is tested first (most ids of a 150k vocabulary). A branchless
  // form with selects, and a two-uint16 step, measured slower.
  let other = false;
  while (i < n && !other) {
    const k = <u32>min<u64>(<u64>(n - i), <u64>(e - p) / 5);
    if (k == 0) break;
    const stop = i + k;
    let o = out + (<usize>i << 2);
    while (i < stop) {
      const b = <u32>load<u8>(p);
      if (b == 0xcd) {
        store<u32>(o, <u32>bswap<u16>(load<u16>(p, 1)));
        p += 3;
      } else if (b < 0x80) {
        store<u32>(o, b);
        p++;
      } else if (b == 0xce) {
        store<u32>(o, bswap<u32>(load<u32>(p, 1)));
        p += 5;
      } else if (b == 0xcc) {
        store<u32>(o, <u32>load<u8>(p, 1));
        p += 2;
      } else {
        other = true; // another form: the checked reader below
        break;
      }
      i++;
      o += 4;
    }
  }
  while (i < n) {
    if (p >= e) { fail(S_CORRUPT); return; }
    const b = <u32>load<u8>(p);
    const o = out + (<usize>i << 2);
    if (b == 0xcd && e - p >= 3) {
      // Two uint16 ids in a row (most ids of a 150k vocabulary) in one 6-byte step.
      if (e - p >= 6 && load<u8>(p, 3) == 0xcd && i + 1 < n) {
        store<u32>(o, <u32>bswap<u16>(load<u16>(p, 1)));
        store<u32>(o, <u32>bswap<u16>(load<u16>(p, 4)), 4);
        i += 2;
        p += 6;
        continue;
      }
      store<u32>(o, <u32>bswap<u16>(load<u16>(p, 1)));
      p += 3;
    } else if (b < 0x80) {
      store<u32>(o, b);
      p++;
    } else if (b == 0xce && e - p >= 5) {
      store<u32>(o, bswap<u32>(load<u32>(p, 1)));
      p += 5;
    } else if (b == 0xcc && e - p >= 2) {
      store<u32>(o, <u32>load<u8>(p, 1));
      p += 2;
    } else {
      pos = p;
      const v = readUint();
      if (st != S_OK) return;
      if (v > 0xffffffff) { fail(S_CORRUPT); return; }
      store<u32>(o, <u32>v);
      p = pos;
    }
    i++;
  }
  pos = p;
}
