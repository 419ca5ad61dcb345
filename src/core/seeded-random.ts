/** @module Seeded pseudo-randomness (xoshiro128**) so that tests, simulations and tie-breaks are reproducible. */

export interface Random {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [0, n). */
  int(n: number): number;
  /** Uniform unsigned 32-bit integer. */
  u32(): number;
  /** Uniform unsigned 64-bit integer. */
  u64(): bigint;
}

function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export function seededRandom(seed: number): Random {
  const init = splitmix32(seed);
  let a = init(), b = init(), c = init(), d = init();
  if ((a | b | c | d) === 0) a = 1;
  const u32 = (): number => {
    const r = Math.imul(rotl(Math.imul(b, 5) >>> 0, 7), 9) >>> 0;
    const t = (b << 9) >>> 0;
    c ^= a; d ^= b; b ^= c; a ^= d;
    c = (c ^ t) >>> 0;
    d = rotl(d, 11);
    return r;
  };
  return {
    u32,
    next: () => u32() / 4294967296,
    int: (n) => Math.floor((u32() / 4294967296) * n),
    u64: () => (BigInt(u32()) << 32n) | BigInt(u32()),
  };
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
