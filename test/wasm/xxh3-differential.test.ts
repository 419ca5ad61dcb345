import { describe, it, expect, beforeAll } from "vitest";
import { createXXHash3 } from "hash-wasm";
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import type { KvIndex } from "../../src/core/kv-index.ts";
import { xxh3Reference } from "../../src/reference/xxh3-reference.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";

// hash-wasm is an independent XXH3 (xxHash's C compiled to WASM): the oracle for every length class.
const SEEDS = [0n, 1n, 1337n, 0xdeadbeefcafebaben, 0xffffffffffffffffn, 0x8000000000000000n];

async function oracle(seed: bigint): Promise<(data: Uint8Array) => bigint> {
  const h = await createXXHash3(Number(seed & 0xffffffffn), Number(seed >> 32n));
  return (data) => {
    h.init();
    h.update(data);
    return BigInt("0x" + h.digest("hex"));
  };
}

let idx: KvIndex;
beforeAll(async () => {
  idx = await createKvIndex({ capacity: 1024, maxSlots: 1, eventBytes: 1 << 16 });
});

describe("XXH3-64 against an independent implementation", () => {
  it("should match on every length 0..2100 for several seeds (all length classes, the 1024-byte block path)", async () => {
    const rnd = seededRandom(7);
    const data = new Uint8Array(2100);
    for (let i = 0; i < data.length; i++) data[i] = rnd.int(256);
    let checked = 0;
    for (const seed of SEEDS) {
      const ref = await oracle(seed);
      for (let len = 0; len <= 2100; len++) {
        const d = data.subarray(0, len);
        expect(idx.xxh3(d, seed), `len ${len} seed ${seed}`).toBe(ref(d));
        checked++;
      }
    }
    expect(checked).toBe(6 * 2101);
  });

  it("should match on long inputs and random seeds", async () => {
    const rnd = seededRandom(11);
    for (let k = 0; k < 60; k++) {
      const len = 2000 + rnd.int(60000);
      const d = new Uint8Array(len);
      for (let i = 0; i < len; i++) d[i] = rnd.int(256);
      const seed = rnd.u64();
      expect(idx.xxh3(d, seed)).toBe((await oracle(seed))(d));
    }
  });

  it("should agree with the BigInt reference model", async () => {
    const rnd = seededRandom(3);
    for (let k = 0; k < 600; k++) {
      const len = rnd.int(1300);
      const d = new Uint8Array(len);
      for (let i = 0; i < len; i++) d[i] = rnd.int(256);
      const seed = k % 3 === 0 ? 1337n : rnd.u64();
      expect(xxh3Reference(d, seed)).toBe(idx.xxh3(d, seed));
    }
  });
});
