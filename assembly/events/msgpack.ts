// A bounds-checked msgpack reader over linear memory, the in-core twin of src/events/msgpack-cursor.ts: the same
// type codes, widths and limits are accepted and refused, so the engine-batch decoder built on it rejects exactly
// what the TypeScript decoder rejects. No exceptions: the first failure sets `st` and moves the cursor to the end,
// after which every read fails too; callers check `st` where a loop would otherwise keep going.

/** Decoder status: still fine. */
export const S_OK: i32 = 0;
/** A valid shape this decoder leaves to the TypeScript one (LoRA names, EAGLE pairs, unusual tiers, non-ASCII). */
export const S_FALLBACK: i32 = 1;
/** Malformed input: the TypeScript decoder refuses it too. */
export const S_CORRUPT: i32 = 2;
/** The decoded records would not fit the output region. */
export const S_FULL: i32 = 3;

/** Nesting deeper than this is refused (the TypeScript reader's MAX_SKIP_DEPTH). */
const MAX_SKIP_DEPTH: i32 = 64;

export let pos: usize = 0;
export let end: usize = 0;
export let st: i32 = S_OK;

export function cursorReset(p: usize, n: usize): void {
  pos = p;
  end = p + n;
  st = S_OK;
}

export function fail(code: i32): void {
  if (st == S_OK) st = code;
  pos = end;
}

// @ts-ignore: decorator
@inline function need(n: usize): bool {
  if (end - pos < n) { fail(S_CORRUPT); return false; }
  return true;
}

// @ts-ignore: decorator
@inline function be16(p: usize): u32 { return <u32>bswap<u16>(load<u16>(p)); }
// @ts-ignore: decorator
@inline function be32(p: usize): u32 { return bswap<u32>(load<u32>(p)); }
// @ts-ignore: decorator
@inline export function be64(p: usize): u64 { return bswap<u64>(load<u64>(p)); }

/** The type code at the cursor; 0xc1 (never valid) when the input is exhausted. */
// @ts-ignore: decorator
@inline export function peek(): u32 {
  if (pos >= end) { fail(S_CORRUPT); return 0xc1; }
  return <u32>load<u8>(pos);
}

// @ts-ignore: decorator
@inline export function isArrayCode(c: u32): bool { return (c & 0xf0) == 0x90 || c == 0xdc || c == 0xdd; }
// @ts-ignore: decorator
@inline export function isMapCode(c: u32): bool { return (c & 0xf0) == 0x80 || c == 0xde || c == 0xdf; }
// @ts-ignore: decorator
@inline export function isStrCode(c: u32): bool { return (c & 0xe0) == 0xa0 || c == 0xd9 || c == 0xda || c == 0xdb; }
// @ts-ignore: decorator
@inline export function isIntCode(c: u32): bool { return c <= 0x7f || c >= 0xe0 || (c >= 0xcc && c <= 0xd3); }

/** Array header: the element count, refused when it exceeds the bytes left (each element takes one at least). */
export function arrayLen(): u32 {
  const c = peek();
  let n: u32;
  if ((c & 0xf0) == 0x90) { n = c & 0x0f; pos++; }
  else if (c == 0xdc) { if (!need(3)) return 0; n = be16(pos + 1); pos += 3; }
  else if (c == 0xdd) { if (!need(5)) return 0; n = be32(pos + 1); pos += 5; }
  else { fail(S_CORRUPT); return 0; }
  if (<usize>n > end - pos) { fail(S_CORRUPT); return 0; }
  return n;
}

export function mapLen(): u32 {
  const c = peek();
  let n: u32;
  if ((c & 0xf0) == 0x80) { n = c & 0x0f; pos++; }
  else if (c == 0xde) { if (!need(3)) return 0; n = be16(pos + 1); pos += 3; }
  else if (c == 0xdf) { if (!need(5)) return 0; n = be32(pos + 1); pos += 5; }
  else { fail(S_CORRUPT); return 0; }
  if (<u64>n * 2 > <u64>(end - pos)) { fail(S_CORRUPT); return 0; }
  return n;
}

/** A str header: moves past it and returns the byte length of the UTF-8 that follows (all of it present). */
export function strLen(): u32 {
  const c = peek();
  let n: u32;
  if ((c & 0xe0) == 0xa0) { n = c & 0x1f; pos++; }
  else if (c == 0xd9) { if (!need(2)) return 0; n = <u32>load<u8>(pos + 1); pos += 2; }
  else if (c == 0xda) { if (!need(3)) return 0; n = be16(pos + 1); pos += 3; }
  else if (c == 0xdb) { if (!need(5)) return 0; n = be32(pos + 1); pos += 5; }
  else { fail(S_CORRUPT); return 0; }
  if (!need(<usize>n)) return 0;
  return n;
}

/** An integer in 0..2^53-1; negative or wider values are refused (MsgpackCursor.uint). */
export function readUint(): u64 {
  const c = peek();
  const p = pos;
  if (c <= 0x7f) { pos = p + 1; return <u64>c; }
  switch (c) {
    case 0xcc: { if (!need(2)) return 0; pos = p + 2; return <u64>load<u8>(p + 1); }
    case 0xcd: { if (!need(3)) return 0; pos = p + 3; return <u64>be16(p + 1); }
    case 0xce: { if (!need(5)) return 0; pos = p + 5; return <u64>be32(p + 1); }
    case 0xcf: {
      if (!need(9)) return 0;
      if (be32(p + 1) >= 0x200000) { fail(S_CORRUPT); return 0; }
      pos = p + 9;
      return be64(p + 1);
    }
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
      const x = readInt();
      if (x < 0) { fail(S_CORRUPT); return 0; }
      return <u64>x;
    }
  }
  fail(S_CORRUPT);
  return 0;
}

/** Any integer within ±2^53 (MsgpackCursor.int). */
export function readInt(): i64 {
  const c = peek();
  const p = pos;
  if (c >= 0xe0) { pos = p + 1; return <i64>c - 0x100; }
  switch (c) {
    case 0xd0: { if (!need(2)) return 0; pos = p + 2; return <i64>load<i8>(p + 1); }
    case 0xd1: { if (!need(3)) return 0; pos = p + 3; return <i64><i16>bswap<u16>(load<u16>(p + 1)); }
    case 0xd2: { if (!need(5)) return 0; pos = p + 5; return <i64><i32>be32(p + 1); }
    case 0xd3: {
      if (!need(9)) return 0;
      const hi = <i32>be32(p + 1);
      if (hi >= 0x200000 || hi < -0x200000) { fail(S_CORRUPT); return 0; }
      pos = p + 9;
      return <i64>be64(p + 1);
    }
  }
  return <i64>readUint();
}

/** A float64/float32, or any integer (MsgpackCursor.float). */
export function readFloat(): f64 {
  const c = peek();
  if (c == 0xcb) { if (!need(9)) return 0; const x = reinterpret<f64>(be64(pos + 1)); pos += 9; return x; }
  if (c == 0xca) { if (!need(5)) return 0; const x = <f64>reinterpret<f32>(be32(pos + 1)); pos += 5; return x; }
  if (isIntCode(c)) return <f64>readInt();
  fail(S_CORRUPT);
  return 0;
}

/**
 * A 64-bit block hash: uint64 and int64 share the bit pattern (SGLang's signed hashes fold to uint64), shorter
 * signed forms are sign-extended, `bin` keeps its last 8 bytes (MsgpackCursor.hash).
 */
export function readHash(): u64 {
  const c = peek();
  const p = pos;
  if (c <= 0x7f) { pos = p + 1; return <u64>c; }
  if (c >= 0xe0) { pos = p + 1; return <u64>(<i64>c - 0x100); }
  switch (c) {
    case 0xcc: { if (!need(2)) return 0; pos = p + 2; return <u64>load<u8>(p + 1); }
    case 0xcd: { if (!need(3)) return 0; pos = p + 3; return <u64>be16(p + 1); }
    case 0xce: { if (!need(5)) return 0; pos = p + 5; return <u64>be32(p + 1); }
    case 0xcf: case 0xd3: { if (!need(9)) return 0; pos = p + 9; return be64(p + 1); }
    case 0xd0: { if (!need(2)) return 0; pos = p + 2; return <u64><i64>load<i8>(p + 1); }
    case 0xd1: { if (!need(3)) return 0; pos = p + 3; return <u64><i64><i16>bswap<u16>(load<u16>(p + 1)); }
    case 0xd2: { if (!need(5)) return 0; pos = p + 5; return <u64><i64><i32>be32(p + 1); }
    case 0xc4: case 0xc5: case 0xc6: {
      const n = binLen();
      if (st != S_OK) return 0;
      if (n < 8) { fail(S_CORRUPT); return 0; }
      const h = be64(pos + <usize>n - 8);
      pos += <usize>n;
      return h;
    }
  }
  fail(S_CORRUPT);
  return 0;
}

function binLen(): u32 {
  const c = peek();
  let n: u32;
  if (c == 0xc4) { if (!need(2)) return 0; n = <u32>load<u8>(pos + 1); pos += 2; }
  else if (c == 0xc5) { if (!need(3)) return 0; n = be16(pos + 1); pos += 3; }
  else { if (!need(5)) return 0; n = be32(pos + 1); pos += 5; }
  if (!need(<usize>n)) return 0;
  return n;
}

/** Skips one value of any type, refusing nesting deeper than the TypeScript reader allows. */
export function skip(): void {
  skipAt(0);
}

function skipAt(depth: i32): void {
  const c = peek();
  if (st != S_OK) return;
  if (isArrayCode(c) || isMapCode(c)) {
    const n: u64 = isArrayCode(c) ? <u64>arrayLen() : <u64>mapLen() * 2;
    if (st != S_OK) return;
    if (depth + 1 > MAX_SKIP_DEPTH) { fail(S_CORRUPT); return; }
    for (let i: u64 = 0; i < n; i++) {
      // nil and positive fixints (extra_keys of [None, …], group ids) inline; anything else recursively.
      if (pos < end) {
        const b = <u32>load<u8>(pos);
        if (b <= 0x7f || b == 0xc0) { pos++; continue; }
      }
      skipAt(depth + 1);
      if (st != S_OK) return;
    }
    return;
  }
  skipScalar(c);
}

function skipScalar(c: u32): void {
  if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) { pos++; return; }
  if (isStrCode(c)) { const n = strLen(); pos += <usize>n; return; }
  let n: usize;
  switch (c) {
    case 0xc4: case 0xc5: case 0xc6: { const b = binLen(); pos += <usize>b; return; }
    case 0xcc: case 0xd0: { n = 2; break; }
    case 0xcd: case 0xd1: { n = 3; break; }
    case 0xce: case 0xd2: case 0xca: { n = 5; break; }
    case 0xcf: case 0xd3: case 0xcb: { n = 9; break; }
    case 0xd4: { n = 3; break; }
    case 0xd5: { n = 4; break; }
    case 0xd6: { n = 6; break; }
    case 0xd7: { n = 10; break; }
    case 0xd8: { n = 18; break; }
    case 0xc7: { if (!need(2)) return; n = 3 + <usize>load<u8>(pos + 1); break; }
    case 0xc8: { if (!need(3)) return; n = 4 + <usize>be16(pos + 1); break; }
    case 0xc9: { if (!need(5)) return; n = 6 + <usize>be32(pos + 1); break; }
    default: { fail(S_CORRUPT); return; }
  }
  if (!need(n)) return;
  pos += n;
}

/** True when the `n` bytes at `p` are 7-bit ASCII (valid UTF-8 whatever they say). */
export function isAscii(p: usize, n: usize): bool {
  let i: usize = 0;
  for (; i + 8 <= n; i += 8) if ((load<u64>(p + i) & 0x8080808080808080) != 0) return false;
  for (; i < n; i++) if (load<u8>(p + i) >= 0x80) return false;
  return true;
}

/** True when the `n` bytes at `p` are all msgpack nil (0xc0). */
export function allNil(p: usize, n: usize): bool {
  let i: usize = 0;
  for (; i + 8 <= n; i += 8) if (load<u64>(p + i) != 0xc0c0c0c0c0c0c0c0) return false;
  for (; i < n; i++) if (load<u8>(p + i) != 0xc0) return false;
  return true;
}

/**
 * True when the `n` bytes at `p` equal the `n` bytes at `k` (a constant from memory.data). The last word is read
 * overlapping the one before it rather than byte by byte: map keys are compared for every event.
 */
export function bytesEq(p: usize, k: usize, n: usize): bool {
  if (n >= 8) {
    const last = n - 8;
    for (let i: usize = 0; i < last; i += 8) if (load<u64>(p + i) != load<u64>(k + i)) return false;
    return load<u64>(p + last) == load<u64>(k + last);
  }
  if (n >= 4) return load<u32>(p) == load<u32>(k) && load<u32>(p + n - 4) == load<u32>(k + n - 4);
  for (let i: usize = 0; i < n; i++) if (load<u8>(p + i) != load<u8>(k + i)) return false;
  return true;
}
