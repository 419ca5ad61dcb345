/**
 * @module A cache namespace (vLLM's `cache_salt`, a tenant) enters the hashes as vLLM puts it: into the first block
 * only, as one more extra hash of that block, so later blocks differ through the chain and an engine's continuation
 * events (no salt in them) are hashed without knowing the tenant.
 */
import type { HashOptions } from "./hash-seeds.ts";

const MAX_CACHED = 1024;
const encoder = new TextEncoder();
/** Inner seed of the salt's own hash: the one the seed scheme gives namespaces (hash-seeds.ts). */
const SALT_SEED = 1n;

export type Xxh3 = (bytes: Uint8Array, seed: bigint) => bigint;

/** Salt hashes by salt; reset when full, so memory stays bounded however many tenants there are. */
export class CacheSalts {
  readonly #cache = new Map<string, readonly { block: number; hash: bigint }[]>();

  constructor(private readonly xxh3: Xxh3) {}

  /** The extra hash of block 0 for `salt` (none for no salt), in the `multimodal` form the core hashes. */
  extra(salt: string | undefined): readonly { block: number; hash: bigint }[] | undefined {
    if (!salt) return undefined;
    let e = this.#cache.get(salt);
    if (!e) {
      e = Object.freeze([Object.freeze({ block: 0, hash: this.xxh3(encoder.encode(salt), SALT_SEED) })]);
      if (this.#cache.size >= MAX_CACHED) this.#cache.clear();
      this.#cache.set(salt, e);
    }
    return e;
  }

  /** Hash options for a prompt of adapter `lora` in namespace `salt`. */
  options(blockSize: number, lora: string | undefined, salt: string | undefined, eagle?: boolean): HashOptions {
    return { blockSize, lora, eagle, multimodal: this.extra(salt) };
  }
}
