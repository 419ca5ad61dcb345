import { describe, expect, it } from "vitest";
import { encode, ExtData } from "@msgpack/msgpack";
import { seededRandom, type Random } from "../../src/core/seeded-random.ts";
import { isKvgateError } from "../../src/core/errors.ts";
import { MsgpackCursor } from "../../src/events/msgpack-cursor.ts";

const INTS = [0, 1, 127, 128, 255, 256, 65_535, 65_536, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, -1, -32, -33, -128, -129, -32_768, -32_769, -(2 ** 31), -(2 ** 31) - 1, -(2 ** 53) + 1];

function randomValue(r: Random, depth: number): unknown {
  switch (r.int(depth > 3 ? 8 : 11)) {
    case 0: return null;
    case 1: return r.int(2) === 1;
    case 2: return INTS[r.int(INTS.length)]!;
    case 3: return r.u64();
    case 4: return -BigInt.asUintN(63, r.u64()) - 1n;
    case 5: return r.next() * 1e6 - 5e5;
    case 6: return "x".repeat(r.int(3) === 0 ? 40 + r.int(300) : r.int(8)) + (r.int(3) === 0 ? "ü€😀" : "");
    case 7: return new Uint8Array(r.int(300)).map(() => r.int(256));
    case 8: return Array.from({ length: r.int(20) }, () => randomValue(r, depth + 1));
    case 9: return Object.fromEntries(Array.from({ length: r.int(6) }, (_, i) => [`k${i}`, randomValue(r, depth + 1)]));
    default: return new ExtData(r.int(100), new Uint8Array(r.int(3) === 0 ? 1 << r.int(5) : r.int(40)));
  }
}

function throwsCorrupt(fn: () => void): boolean {
  try {
    fn();
    return false;
  } catch (e) {
    return isKvgateError(e) && e.code === "KVGATE_ERR_CORRUPT_EVENT";
  }
}

describe("MsgpackCursor against @msgpack/msgpack", () => {
  it("should skip exactly one encoded value of any type, and refuse every strict prefix of it", () => {
    const r = seededRandom(7);
    const c = new MsgpackCursor();
    for (let i = 0; i < 600; i++) {
      const bytes = encode(randomValue(r, 0), { useBigInt64: true });
      c.reset(bytes);
      c.skip();
      expect(c.pos).toBe(bytes.length);
      const cut = r.int(bytes.length);
      c.reset(bytes.subarray(0, cut));
      expect(throwsCorrupt(() => c.skip()), `prefix ${cut} of ${bytes.length}`).toBe(true);
    }
  });

  it("should read integers of every width as numbers and as 64-bit hashes (two's complement for negatives)", () => {
    const c = new MsgpackCursor();
    const out = new Uint32Array(2);
    const r = seededRandom(3);
    const values: (number | bigint)[] = [...INTS, ...Array.from({ length: 200 }, () => r.u64()), -1n, -(2n ** 63n), 2n ** 64n - 1n];
    for (const v of values) {
      // Numbers beyond 32 bits would be written as float64 with useBigInt64, so they go without it (as uint64/int64).
      const bytes = encode(v, { useBigInt64: typeof v === "bigint" });
      c.reset(bytes);
      c.hash(out, 0);
      expect(c.pos).toBe(bytes.length);
      expect((BigInt(out[1]!) << 32n) | BigInt(out[0]!)).toBe(BigInt.asUintN(64, BigInt(v)));
      if (typeof v === "number") {
        c.reset(bytes);
        expect(c.int()).toBe(v);
        c.reset(bytes);
        if (v >= 0) expect(c.uint()).toBe(v);
        else expect(throwsCorrupt(() => c.uint())).toBe(true);
      }
    }
  });

  it("should read strings (short ASCII, long, non-ASCII) and compare keys as bytes", () => {
    const c = new MsgpackCursor();
    for (const s of ["", "GPU", "BlockStored", "kv_cache_spec_kind", "ü€😀", "y".repeat(70_000)]) {
      c.reset(encode(s));
      expect(c.str()).toBe(s);
    }
    const keys = ["type", "token_ids"].map((k) => new TextEncoder().encode(k));
    c.reset(encode("token_ids"));
    expect(c.key(keys)).toBe(1);
    c.reset(encode("token_idz"));
    expect(c.key(keys)).toBe(-1);
  });

  it("should refuse the reserved type code, nesting deeper than 64, and lengths beyond the buffer", () => {
    const c = new MsgpackCursor();
    expect(throwsCorrupt(() => c.reset(new Uint8Array([0xc1])).skip())).toBe(true);
    let deep: unknown = 1;
    for (let i = 0; i < 80; i++) deep = [deep];
    expect(throwsCorrupt(() => c.reset(encode(deep)).skip())).toBe(true);
    expect(throwsCorrupt(() => c.reset(new Uint8Array([0xdd, 0xff, 0xff, 0xff, 0xff, 1])).array())).toBe(true);
    expect(throwsCorrupt(() => c.reset(new Uint8Array([0xdf, 0x10, 0, 0, 0, 1])).map())).toBe(true);
    expect(throwsCorrupt(() => c.reset(new Uint8Array([0xdb, 0xff, 0xff, 0xff, 0xff, 0x41])).str())).toBe(true);
    expect(throwsCorrupt(() => c.reset(new Uint8Array([0xa2, 0xc3, 0x28])).str())).toBe(true);
    expect(throwsCorrupt(() => c.reset(encode(new Uint8Array(4))).hash(new Uint32Array(2), 0))).toBe(true);
    expect(throwsCorrupt(() => c.reset(encode(1.5)).hash(new Uint32Array(2), 0))).toBe(true);
  });
});
