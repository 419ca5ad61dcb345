// XXH3-64 with seed, bit-identical to the reference xxHash; written here because no npm package offers seeded XXH3 that runs on Workers.
// Every function reads raw linear memory (ptr, len) so callers never cross into JS per block.

// @ts-ignore: decorator
@inline const P32_1: u64 = 0x9E3779B1;
// @ts-ignore: decorator
@inline const P32_2: u64 = 0x85EBCA77;
// @ts-ignore: decorator
@inline const P32_3: u64 = 0xC2B2AE3D;
// @ts-ignore: decorator
@inline const P64_1: u64 = 0x9E3779B185EBCA87;
// @ts-ignore: decorator
@inline const P64_2: u64 = 0xC2B2AE3D27D4EB4F;
// @ts-ignore: decorator
@inline const P64_3: u64 = 0x165667B19E3779F9;
// @ts-ignore: decorator
@inline const P64_4: u64 = 0x85EBCA77C2B2AE63;
// @ts-ignore: decorator
@inline const P64_5: u64 = 0x27D4EB2F165667C5;
// @ts-ignore: decorator
@inline const PMX_1: u64 = 0x165667919E3779F9;
// @ts-ignore: decorator
@inline const PMX_2: u64 = 0x9FB21C651E98DF25;

/** The 192-byte default secret of the XXH3 specification, as little-endian u64 words. */
export const SECRET: usize = memory.data<u64>([
  0xBE4BA423396CFEB8, 0x1CAD21F72C81017C, 0xDB979083E96DD4DE, 0x1F67B3B7A4A44072,
  0x78E5C0CC4EE679CB, 0x2172FFCC7DD05A82, 0x8E2443F7744608B8, 0x4C263A81E69035E0,
  0xCB00C391BB52283C, 0xA32E531B8B65D088, 0x4EF90DA297486471, 0xD8ACDEA946EF1938,
  0x3F349CE33F76FAA8, 0x1D4F0BC7C7BBDCF9, 0x3159B4CD4BE0518A, 0x647378D9C97E9FC8,
  0xC3EBD33483ACC5EA, 0xEB6313FAFFA081C5, 0x49DAF0B751DD0D17, 0x9E68D429265516D3,
  0xFCA1477D58BE162B, 0xCE31D07AD1B8F88F, 0x280416958F3ACB45, 0x7E404BBBCAFBD7AF,
], 16);

// The seeded secret is derived once per seed: re-deriving it per call would cost more than hashing a 256-byte block.
const SEEDED: usize = memory.data(192, 16);
let seededFor: u64 = 0;
let seededValid = false;

// @ts-ignore: decorator
@inline function rd64(p: usize): u64 { return load<u64>(p); }
// @ts-ignore: decorator
@inline function rd32(p: usize): u64 { return <u64>load<u32>(p); }

/** 64x64 -> 128-bit product folded to 64 bits (lo ^ hi); WASM has no widening multiply, so four 32x32 products. */
// @ts-ignore: decorator
@inline export function mulFold64(a: u64, b: u64): u64 {
  const aLo = a & 0xFFFFFFFF, aHi = a >> 32, bLo = b & 0xFFFFFFFF, bHi = b >> 32;
  const lolo = aLo * bLo, hilo = aHi * bLo, lohi = aLo * bHi, hihi = aHi * bHi;
  const cross = (lolo >> 32) + (hilo & 0xFFFFFFFF) + lohi;
  const upper = (hilo >> 32) + (cross >> 32) + hihi;
  const lower = (cross << 32) | (lolo & 0xFFFFFFFF);
  return lower ^ upper;
}

// @ts-ignore: decorator
@inline function avalanche3(h: u64): u64 {
  h ^= h >> 37;
  h *= PMX_1;
  return h ^ (h >> 32);
}

// @ts-ignore: decorator
@inline function avalanche64(h: u64): u64 {
  h ^= h >> 33;
  h *= P64_2;
  h ^= h >> 29;
  h *= P64_3;
  return h ^ (h >> 32);
}

// @ts-ignore: decorator
@inline function rrmxmx(h: u64, len: u64): u64 {
  h ^= rotl<u64>(h, 49) ^ rotl<u64>(h, 24);
  h *= PMX_2;
  h ^= (h >> 35) + len;
  h *= PMX_2;
  return h ^ (h >> 28);
}

// @ts-ignore: decorator
@inline function mix16(p: usize, s: usize, seed: u64): u64 {
  return mulFold64(rd64(p) ^ (rd64(s) + seed), rd64(p + 8) ^ (rd64(s + 8) - seed));
}

/** XXH3_64(le(a) ‖ le(b), seed): the 16-byte path specialised for chaining block hashes, no memory traffic. */
// @ts-ignore: decorator
@inline export function xxh3Pair(a: u64, b: u64, seed: u64): u64 {
  const lo = a ^ ((rd64(SECRET + 24) ^ rd64(SECRET + 32)) + seed);
  const hi = b ^ ((rd64(SECRET + 40) ^ rd64(SECRET + 48)) - seed);
  return avalanche3(16 + bswap<u64>(lo) + hi + mulFold64(lo, hi));
}

function len1to3(p: usize, len: usize, seed: u64): u64 {
  const c1 = <u32>load<u8>(p), c2 = <u32>load<u8>(p + (len >> 1)), c3 = <u32>load<u8>(p + len - 1);
  const combined = (c1 << 16) | (c2 << 24) | c3 | (<u32>len << 8);
  const flip = (rd32(SECRET) ^ rd32(SECRET + 4)) + seed;
  return avalanche64(<u64>combined ^ flip);
}

function len4to8(p: usize, len: usize, seed: u64): u64 {
  seed ^= <u64>bswap<u32>(<u32>seed) << 32;
  const in1 = rd32(p), in2 = rd32(p + len - 4);
  const flip = (rd64(SECRET + 8) ^ rd64(SECRET + 16)) - seed;
  return rrmxmx((in2 + (in1 << 32)) ^ flip, <u64>len);
}

function len9to16(p: usize, len: usize, seed: u64): u64 {
  const lo = rd64(p) ^ ((rd64(SECRET + 24) ^ rd64(SECRET + 32)) + seed);
  const hi = rd64(p + len - 8) ^ ((rd64(SECRET + 40) ^ rd64(SECRET + 48)) - seed);
  return avalanche3(<u64>len + bswap<u64>(lo) + hi + mulFold64(lo, hi));
}

function len17to128(p: usize, len: usize, seed: u64): u64 {
  let acc = <u64>len * P64_1;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) {
        acc += mix16(p + 48, SECRET + 96, seed);
        acc += mix16(p + len - 64, SECRET + 112, seed);
      }
      acc += mix16(p + 32, SECRET + 64, seed);
      acc += mix16(p + len - 48, SECRET + 80, seed);
    }
    acc += mix16(p + 16, SECRET + 32, seed);
    acc += mix16(p + len - 32, SECRET + 48, seed);
  }
  acc += mix16(p, SECRET, seed);
  acc += mix16(p + len - 16, SECRET + 16, seed);
  return avalanche3(acc);
}

function len129to240(p: usize, len: usize, seed: u64): u64 {
  let acc = <u64>len * P64_1;
  for (let i: usize = 0; i < 8; i++) acc += mix16(p + 16 * i, SECRET + 16 * i, seed);
  acc = avalanche3(acc);
  const rounds = len >> 4;
  for (let i: usize = 8; i < rounds; i++) acc += mix16(p + 16 * i, SECRET + 16 * (i - 8) + 3, seed);
  acc += mix16(p + len - 16, SECRET + 136 - 17, seed);
  return avalanche3(acc);
}

/** The secret for `seed` (the default one for 0); a caller hashing many inputs with one seed asks once. */
export function seededSecret(seed: u64): usize {
  if (seed == 0) return SECRET;
  if (!seededValid || seededFor != seed) {
    for (let i: usize = 0; i < 192; i += 16) {
      store<u64>(SEEDED + i, rd64(SECRET + i) + seed);
      store<u64>(SEEDED + i + 8, rd64(SECRET + i + 8) - seed);
    }
    seededFor = seed;
    seededValid = true;
  }
  return SEEDED;
}

/** Accumulators are module globals only between the stripe loop and the merge; the stripe loop keeps them in locals. */
let a0: u64 = 0, a1: u64 = 0, a2: u64 = 0, a3: u64 = 0, a4: u64 = 0, a5: u64 = 0, a6: u64 = 0, a7: u64 = 0;

function stripes(p: usize, s: usize, n: usize): void {
  if (ASC_FEATURE_SIMD) {
    stripesSimd(p, s, n);
    return;
  }
  let x0 = a0, x1 = a1, x2 = a2, x3 = a3, x4 = a4, x5 = a5, x6 = a6, x7 = a7;
  for (let k: usize = 0; k < n; k++) {
    const ip = p + (k << 6), sp = s + (k << 3);
    let d: u64, key: u64;
    d = rd64(ip); key = d ^ rd64(sp); x1 += d; x0 += (key & 0xFFFFFFFF) * (key >> 32);
    d = rd64(ip + 8); key = d ^ rd64(sp + 8); x0 += d; x1 += (key & 0xFFFFFFFF) * (key >> 32);
    d = rd64(ip + 16); key = d ^ rd64(sp + 16); x3 += d; x2 += (key & 0xFFFFFFFF) * (key >> 32);
    d = rd64(ip + 24); key = d ^ rd64(sp + 24); x2 += d; x3 += (key & 0xFFFFFFFF) * (key >> 32);
    d = rd64(ip + 32); key = d ^ rd64(sp + 32); x5 += d; x4 += (key & 0xFFFFFFFF) * (key >> 32);
    d = rd64(ip + 40); key = d ^ rd64(sp + 40); x4 += d; x5 += (key & 0xFFFFFFFF) * (key >> 32);
    d = rd64(ip + 48); key = d ^ rd64(sp + 48); x7 += d; x6 += (key & 0xFFFFFFFF) * (key >> 32);
    d = rd64(ip + 56); key = d ^ rd64(sp + 56); x6 += d; x7 += (key & 0xFFFFFFFF) * (key >> 32);
  }
  a0 = x0; a1 = x1; a2 = x2; a3 = x3; a4 = x4; a5 = x5; a6 = x6; a7 = x7;
}

// Two accumulators per v128 lane pair: acc[2j], acc[2j+1] += swap(data) + lo32(data^key) * hi32(data^key).
// @ts-ignore: decorator
@inline function lane(acc: v128, ip: usize, sp: usize): v128 {
  const d = v128.load(ip);
  const dk = v128.xor(d, v128.load(sp));
  const prod = i64x2.extmul_low_i32x4_u(v128.shuffle<i32>(dk, dk, 0, 2, 0, 2), v128.shuffle<i32>(dk, dk, 1, 3, 1, 3));
  return i64x2.add(acc, i64x2.add(v128.shuffle<i64>(d, d, 1, 0), prod));
}

function stripesSimd(p: usize, s: usize, n: usize): void {
  let v0 = i64x2(<i64>a0, <i64>a1), v1 = i64x2(<i64>a2, <i64>a3);
  let v2 = i64x2(<i64>a4, <i64>a5), v3 = i64x2(<i64>a6, <i64>a7);
  for (let k: usize = 0; k < n; k++) {
    const ip = p + (k << 6), sp = s + (k << 3);
    v0 = lane(v0, ip, sp);
    v1 = lane(v1, ip + 16, sp + 16);
    v2 = lane(v2, ip + 32, sp + 32);
    v3 = lane(v3, ip + 48, sp + 48);
  }
  a0 = <u64>i64x2.extract_lane(v0, 0); a1 = <u64>i64x2.extract_lane(v0, 1);
  a2 = <u64>i64x2.extract_lane(v1, 0); a3 = <u64>i64x2.extract_lane(v1, 1);
  a4 = <u64>i64x2.extract_lane(v2, 0); a5 = <u64>i64x2.extract_lane(v2, 1);
  a6 = <u64>i64x2.extract_lane(v3, 0); a7 = <u64>i64x2.extract_lane(v3, 1);
}

// @ts-ignore: decorator
@inline function scramble1(a: u64, k: u64): u64 {
  a ^= a >> 47;
  a ^= k;
  return a * P32_1;
}

function scramble(s: usize): void {
  a0 = scramble1(a0, rd64(s)); a1 = scramble1(a1, rd64(s + 8));
  a2 = scramble1(a2, rd64(s + 16)); a3 = scramble1(a3, rd64(s + 24));
  a4 = scramble1(a4, rd64(s + 32)); a5 = scramble1(a5, rd64(s + 40));
  a6 = scramble1(a6, rd64(s + 48)); a7 = scramble1(a7, rd64(s + 56));
}

// @ts-ignore: decorator
@inline function merge(len: usize, s: usize, x0: u64, x1: u64, x2: u64, x3: u64, x4: u64, x5: u64, x6: u64, x7: u64): u64 {
  let r = <u64>len * P64_1;
  r += mulFold64(x0 ^ rd64(s + 11), x1 ^ rd64(s + 19));
  r += mulFold64(x2 ^ rd64(s + 27), x3 ^ rd64(s + 35));
  r += mulFold64(x4 ^ rd64(s + 43), x5 ^ rd64(s + 51));
  r += mulFold64(x6 ^ rd64(s + 59), x7 ^ rd64(s + 67));
  return avalanche3(r);
}

/** hashUpTo1k with the accumulators in four vectors from start to merge (no round trip through globals). */
function hashUpTo1kSimd(p: usize, len: usize, s: usize): u64 {
  let v0 = i64x2(<i64>P32_3, <i64>P64_1), v1 = i64x2(<i64>P64_2, <i64>P64_3);
  let v2 = i64x2(<i64>P64_4, <i64>P32_2), v3 = i64x2(<i64>P64_5, <i64>P32_1);
  const n = (len - 1) >> 6;
  for (let k: usize = 0; k < n; k++) {
    const ip = p + (k << 6), sp = s + (k << 3);
    v0 = lane(v0, ip, sp);
    v1 = lane(v1, ip + 16, sp + 16);
    v2 = lane(v2, ip + 32, sp + 32);
    v3 = lane(v3, ip + 48, sp + 48);
  }
  const ip = p + len - 64, sp = s + 192 - 64 - 7;
  v0 = lane(v0, ip, sp);
  v1 = lane(v1, ip + 16, sp + 16);
  v2 = lane(v2, ip + 32, sp + 32);
  v3 = lane(v3, ip + 48, sp + 48);
  // merge: the secret words at s + 11, 19 (27, 35 …) are contiguous, so each accumulator pair takes one load.
  const f = i64x2.add(
    mulFold64x2(v128.xor(v0, v128.load(s + 11)), v128.xor(v1, v128.load(s + 27))),
    mulFold64x2(v128.xor(v2, v128.load(s + 43)), v128.xor(v3, v128.load(s + 59))));
  return avalanche3(<u64>len * P64_1 + <u64>i64x2.extract_lane(f, 0) + <u64>i64x2.extract_lane(f, 1));
}

/**
 * 241..1024 bytes (block sizes 61..256 tokens) with the secret from seededSecret: no scramble round is needed, only the
 * stripes and the merge.
 */
export function hashUpTo1k(p: usize, len: usize, s: usize): u64 {
  if (ASC_FEATURE_SIMD) return hashUpTo1kSimd(p, len, s);
  a0 = P32_3; a1 = P64_1; a2 = P64_2; a3 = P64_3; a4 = P64_4; a5 = P32_2; a6 = P64_5; a7 = P32_1;
  stripes(p, s, (len - 1) >> 6);
  stripes(p + len - 64, s + 192 - 64 - 7, 1);
  return merge(len, s, a0, a1, a2, a3, a4, a5, a6, a7);
}

function hashLong(p: usize, len: usize, seed: u64): u64 {
  const s = seededSecret(seed);
  if (len <= 1024) return hashUpTo1k(p, len, s);
  a0 = P32_3; a1 = P64_1; a2 = P64_2; a3 = P64_3; a4 = P64_4; a5 = P32_2; a6 = P64_5; a7 = P32_1;
  // 192-byte secret: 16 stripes of 64 bytes per 1024-byte block.
  const blocks = (len - 1) >> 10;
  for (let b: usize = 0; b < blocks; b++) {
    stripes(p + (b << 10), s, 16);
    scramble(s + 128);
  }
  const tail = p + (blocks << 10);
  stripes(tail, s, ((len - 1) - (blocks << 10)) >> 6);
  stripes(p + len - 64, s + 192 - 64 - 7, 1);
  return merge(len, s, a0, a1, a2, a3, a4, a5, a6, a7);
}

/** XXH3-64 of `len` bytes at `p` with `seed`; every length class of the specification. */
export function xxh3(p: usize, len: usize, seed: u64): u64 {
  if (len <= 16) {
    if (len > 8) return len9to16(p, len, seed);
    if (len >= 4) return len4to8(p, len, seed);
    if (len > 0) return len1to3(p, len, seed);
    return avalanche64(seed ^ (rd64(SECRET + 56) ^ rd64(SECRET + 64)));
  }
  if (len <= 128) return len17to128(p, len, seed);
  if (len <= 240) return len129to240(p, len, seed);
  return hashLong(p, len, seed);
}

// Keys of the 64-byte path (block size 16, the common case), computed once per prompt instead of once per block:
// input offsets 0, 16, 32, 48 meet secret offsets 0, 32, 48, 16.
export const KEYS64: usize = memory.data(64, 16);

// No managed objects here (not even a constant array literal): the stub runtime would bump-allocate it over the
// regions `memory.ts` hands out from the same heap base.
function key64(i: usize, o: usize, seed: u64): void {
  store<u64>(KEYS64 + (i << 4), rd64(SECRET + o) + seed);
  store<u64>(KEYS64 + (i << 4) + 8, rd64(SECRET + o + 8) - seed);
}

export function prepareKeys64(seed: u64): void {
  key64(0, 0, seed);
  key64(1, 32, seed);
  key64(2, 48, seed);
  key64(3, 16, seed);
}

/**
 * mulFold64 of two (a, b) pairs at once: `v` holds [a0, b0] and `w` [a1, b1]; returns [fold(a0, b0), fold(a1, b1)].
 * The four 32x32 partial products of both pairs come from four extmul instructions instead of eight scalar multiplies.
 */
// @ts-ignore: decorator
@inline export function mulFold64x2(v: v128, w: v128): v128 {
  const aS = v128.shuffle<i32>(v, w, 0, 4, 1, 5); // [a0lo, a1lo, a0hi, a1hi]
  const bS = v128.shuffle<i32>(v, w, 2, 6, 3, 7); // [b0lo, b1lo, b0hi, b1hi]
  const aX = v128.shuffle<i32>(v, w, 1, 5, 0, 4); // [a0hi, a1hi, a0lo, a1lo]
  const lolo = i64x2.extmul_low_i32x4_u(aS, bS);
  const hihi = i64x2.extmul_high_i32x4_u(aS, bS);
  const hilo = i64x2.extmul_low_i32x4_u(aX, bS);
  const lohi = i64x2.extmul_high_i32x4_u(aX, bS);
  const m32 = i64x2.splat(0xFFFFFFFF);
  const cross = i64x2.add(i64x2.add(i64x2.shr_u(lolo, 32), v128.and(hilo, m32)), lohi);
  const upper = i64x2.add(i64x2.add(i64x2.shr_u(hilo, 32), i64x2.shr_u(cross, 32)), hihi);
  const lower = v128.or(i64x2.shl(cross, 32), v128.and(lolo, m32));
  return v128.xor(lower, upper);
}

/** XXH3-64 of the 64 bytes at `p` with the 64-byte path's keys held in vectors (k0..k3 = KEYS64 + 0, 16, 32, 48). */
// @ts-ignore: decorator
@inline export function xxh3At64Simd(p: usize, k0: v128, k1: v128, k2: v128, k3: v128): u64 {
  const f = i64x2.add(
    mulFold64x2(v128.xor(v128.load(p), k0), v128.xor(v128.load(p, 16), k1)),
    mulFold64x2(v128.xor(v128.load(p, 32), k2), v128.xor(v128.load(p, 48), k3)));
  return avalanche3(64 * P64_1 + <u64>i64x2.extract_lane(f, 0) + <u64>i64x2.extract_lane(f, 1));
}

/** XXH3-64 of exactly 64 bytes with the keys `prepareKeys64` left for the seed. */
// @ts-ignore: decorator
@inline export function xxh3At64(p: usize): u64 {
  let acc: u64 = 64 * P64_1;
  acc += mulFold64(rd64(p) ^ rd64(KEYS64), rd64(p + 8) ^ rd64(KEYS64 + 8));
  acc += mulFold64(rd64(p + 16) ^ rd64(KEYS64 + 16), rd64(p + 24) ^ rd64(KEYS64 + 24));
  acc += mulFold64(rd64(p + 32) ^ rd64(KEYS64 + 32), rd64(p + 40) ^ rd64(KEYS64 + 40));
  acc += mulFold64(rd64(p + 48) ^ rd64(KEYS64 + 48), rd64(p + 56) ^ rd64(KEYS64 + 56));
  return avalanche3(acc);
}
