/** @module Plain BigInt XXH3-64 (seeded), written for readability: the oracle and baseline for the WASM hash. */

const M64 = (1n << 64n) - 1n;
const P32_1 = 0x9e3779b1n, P32_2 = 0x85ebca77n, P32_3 = 0xc2b2ae3dn;
const P64_1 = 0x9e3779b185ebca87n, P64_2 = 0xc2b2ae3d27d4eb4fn, P64_3 = 0x165667b19e3779f9n;
const P64_4 = 0x85ebca77c2b2ae63n, P64_5 = 0x27d4eb2f165667c5n;
const PMX_1 = 0x165667919e3779f9n, PMX_2 = 0x9fb21c651e98df25n;

/** The specification's 192-byte default secret. */
const SECRET = new Uint8Array(192);
{
  const words = [
    0xbe4ba423396cfeb8n, 0x1cad21f72c81017cn, 0xdb979083e96dd4den, 0x1f67b3b7a4a44072n,
    0x78e5c0cc4ee679cbn, 0x2172ffcc7dd05a82n, 0x8e2443f7744608b8n, 0x4c263a81e69035e0n,
    0xcb00c391bb52283cn, 0xa32e531b8b65d088n, 0x4ef90da297486471n, 0xd8acdea946ef1938n,
    0x3f349ce33f76faa8n, 0x1d4f0bc7c7bbdcf9n, 0x3159b4cd4be0518an, 0x647378d9c97e9fc8n,
    0xc3ebd33483acc5ean, 0xeb6313faffa081c5n, 0x49daf0b751dd0d17n, 0x9e68d429265516d3n,
    0xfca1477d58be162bn, 0xce31d07ad1b8f88fn, 0x280416958f3acb45n, 0x7e404bbbcafbd7afn,
  ];
  const v = new DataView(SECRET.buffer);
  words.forEach((w, i) => v.setBigUint64(i * 8, w, true));
}

const u64 = (x: bigint): bigint => x & M64;
const rd64 = (b: Uint8Array, at: number): bigint => new DataView(b.buffer, b.byteOffset, b.byteLength).getBigUint64(at, true);
const rd32 = (b: Uint8Array, at: number): bigint => BigInt(new DataView(b.buffer, b.byteOffset, b.byteLength).getUint32(at, true));
const rotl = (x: bigint, r: bigint): bigint => u64((x << r) | (x >> (64n - r)));
const bswap64 = (x: bigint): bigint => {
  let r = 0n;
  for (let i = 0n; i < 8n; i++) r = (r << 8n) | ((x >> (8n * i)) & 0xffn);
  return r;
};
const bswap32 = (x: bigint): bigint => ((x & 0xffn) << 24n) | ((x & 0xff00n) << 8n) | ((x >> 8n) & 0xff00n) | ((x >> 24n) & 0xffn);

/** The full 128-bit product, folded: low 64 bits XOR high 64 bits. */
const mulFold = (a: bigint, b: bigint): bigint => {
  const p = a * b;
  return u64(p ^ (p >> 64n));
};

const avalanche3 = (h: bigint): bigint => {
  h ^= h >> 37n;
  h = u64(h * PMX_1);
  return h ^ (h >> 32n);
};

const avalanche64 = (h: bigint): bigint => {
  h ^= h >> 33n;
  h = u64(h * P64_2);
  h ^= h >> 29n;
  h = u64(h * P64_3);
  return h ^ (h >> 32n);
};

const mix16 = (d: Uint8Array, at: number, s: Uint8Array, sat: number, seed: bigint): bigint =>
  mulFold(rd64(d, at) ^ u64(rd64(s, sat) + seed), rd64(d, at + 8) ^ u64(rd64(s, sat + 8) - seed));

function short(d: Uint8Array, seed: bigint): bigint {
  const len = d.length;
  if (len === 0) return avalanche64(seed ^ rd64(SECRET, 56) ^ rd64(SECRET, 64));
  if (len <= 3) {
    const combined = (BigInt(d[0]!) << 16n) | (BigInt(d[len >> 1]!) << 24n) | BigInt(d[len - 1]!) | (BigInt(len) << 8n);
    return avalanche64(combined ^ u64((rd32(SECRET, 0) ^ rd32(SECRET, 4)) + seed));
  }
  if (len <= 8) {
    const s = seed ^ (bswap32(seed & 0xffffffffn) << 32n);
    const input = u64(rd32(d, len - 4) + (rd32(d, 0) << 32n));
    let h = input ^ u64((rd64(SECRET, 8) ^ rd64(SECRET, 16)) - s);
    h ^= rotl(h, 49n) ^ rotl(h, 24n);
    h = u64(h * PMX_2);
    h ^= u64((h >> 35n) + BigInt(len));
    h = u64(h * PMX_2);
    return h ^ (h >> 28n);
  }
  const lo = rd64(d, 0) ^ u64((rd64(SECRET, 24) ^ rd64(SECRET, 32)) + seed);
  const hi = rd64(d, len - 8) ^ u64((rd64(SECRET, 40) ^ rd64(SECRET, 48)) - seed);
  return avalanche3(u64(BigInt(len) + bswap64(lo) + hi + mulFold(lo, hi)));
}

function medium(d: Uint8Array, seed: bigint): bigint {
  const len = d.length;
  let acc = u64(BigInt(len) * P64_1);
  if (len <= 128) {
    const pairs = len > 96 ? 4 : len > 64 ? 3 : len > 32 ? 2 : 1;
    for (let i = 0; i < pairs; i++) {
      acc = u64(acc + mix16(d, 16 * i, SECRET, 32 * i, seed));
      acc = u64(acc + mix16(d, len - 16 * (i + 1), SECRET, 32 * i + 16, seed));
    }
    return avalanche3(acc);
  }
  for (let i = 0; i < 8; i++) acc = u64(acc + mix16(d, 16 * i, SECRET, 16 * i, seed));
  acc = avalanche3(acc);
  for (let i = 8; i < Math.floor(len / 16); i++) acc = u64(acc + mix16(d, 16 * i, SECRET, 16 * (i - 8) + 3, seed));
  acc = u64(acc + mix16(d, len - 16, SECRET, 136 - 17, seed));
  return avalanche3(acc);
}

function long(d: Uint8Array, seed: bigint): bigint {
  const secret = new Uint8Array(192);
  const sv = new DataView(secret.buffer);
  for (let i = 0; i < 192; i += 16) {
    sv.setBigUint64(i, u64(rd64(SECRET, i) + seed), true);
    sv.setBigUint64(i + 8, u64(rd64(SECRET, i + 8) - seed), true);
  }
  const acc = [P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1];
  const stripe = (at: number, sat: number): void => {
    for (let i = 0; i < 8; i++) {
      const v = rd64(d, at + 8 * i);
      const k = v ^ rd64(secret, sat + 8 * i);
      acc[i ^ 1] = u64(acc[i ^ 1]! + v);
      acc[i] = u64(acc[i]! + (k & 0xffffffffn) * (k >> 32n));
    }
  };
  const len = d.length;
  const blocks = Math.floor((len - 1) / 1024);
  for (let b = 0; b < blocks; b++) {
    for (let s = 0; s < 16; s++) stripe(b * 1024 + s * 64, s * 8);
    for (let i = 0; i < 8; i++) {
      let a = acc[i]!;
      a ^= a >> 47n;
      a ^= rd64(secret, 128 + 8 * i);
      acc[i] = u64(a * P32_1);
    }
  }
  const tail = Math.floor((len - 1 - blocks * 1024) / 64);
  for (let s = 0; s < tail; s++) stripe(blocks * 1024 + s * 64, s * 8);
  stripe(len - 64, 192 - 64 - 7);
  let r = u64(BigInt(len) * P64_1);
  for (let i = 0; i < 4; i++) r = u64(r + mulFold(acc[2 * i]! ^ rd64(secret, 11 + 16 * i), acc[2 * i + 1]! ^ rd64(secret, 19 + 16 * i)));
  return avalanche3(r);
}

/** XXH3-64 of `data` with a 64-bit seed. */
export function xxh3Reference(data: Uint8Array, seed = 0n): bigint {
  const s = u64(seed);
  if (data.length <= 16) return short(data, s);
  if (data.length <= 240) return medium(data, s);
  return long(data, s);
}
