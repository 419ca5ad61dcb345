/** @module Seeded pseudo-random numbers so tie-breaks and softmax sampling are reproducible in tests and replays. */

/** A source of uniform draws in [0, 1). */
export type RandomSource = () => number;

/**
 * SplitMix32-seeded xoshiro128**: four 32-bit words of state, period 2^128 − 1, fast with Math.imul and good enough
 * statistically for load balancing. Not for secrets. The same seed always yields the same sequence.
 */
export function createPrng(seed: number): RandomSource {
  let sm = seed >>> 0;
  // SplitMix32 spreads a small or zero seed over all four state words (xoshiro must not start all-zero).
  const next32 = (): number => {
    sm = (sm + 0x9e3779b9) >>> 0;
    let z = sm;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
  let a = next32(), b = next32(), c = next32(), d = next32();
  if ((a | b | c | d) === 0) a = 1;
  return () => {
    const result = Math.imul(rotl(Math.imul(b, 5), 7), 9) >>> 0;
    const t = b << 9;
    c ^= a;
    d ^= b;
    b ^= c;
    a ^= d;
    c ^= t;
    d = rotl(d, 11);
    // 2^-32 scaling keeps every draw strictly below 1.
    return result / 4294967296;
  };
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/** Integer in [0, n) from a random source. */
export function randomInt(rand: RandomSource, n: number): number {
  return Math.floor(rand() * n);
}
