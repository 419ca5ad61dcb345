/** @module The router's view of seeded randomness: a bare draw function, so tie-breaks and softmax sampling replay exactly. */
import { seededRandom } from "../core/seeded-random.ts";

/** A source of uniform draws in [0, 1). */
export type RandomSource = () => number;

/** Draws from the project's one seeded generator (xoshiro128**, src/core/seeded-random.ts). Not for secrets. */
export function createPrng(seed: number): RandomSource {
  return seededRandom(seed).next;
}

/** Integer in [0, n) from a random source. */
export function randomInt(rand: RandomSource, n: number): number {
  return Math.floor(rand() * n);
}
