/**
 * The hosts refuse a core built for another ABI: a module exporting every name with abi_version() = 999, or one
 * lacking an export, fails with KVGATE_ERR_WASM_ABI through the loader (and so through kvgate/core's createIndex).
 */
import { describe, expect, it } from "vitest";
import { ABI_VERSION, EXPORT_NAMES } from "../../src/wasm/abi.ts";
import { instantiateCore } from "../../src/wasm/instantiate.ts";
import { createIndex } from "../../src/core-entry/index.ts";

const leb = (n: number): number[] => {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
};
const section = (id: number, body: number[]): number[] => [id, ...leb(body.length), ...body];
const name = (s: string): number[] => [...leb(s.length), ...new TextEncoder().encode(s)];

/** A module with one memory and one function `() -> i32` returning `version`, exported under `names`. */
function fakeCore(version: number, names: readonly string[]): Uint8Array<ArrayBuffer> {
  const exports = names.map((n) => (n === "memory" ? [...name(n), 2, 0] : [...name(n), 0, 0]));
  const body = [0, 0x41, ...sleb(version), 0x0b];
  return new Uint8Array([
    0, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
    ...section(1, [1, 0x60, 0, 1, 0x7f]),
    ...section(3, [1, 0]),
    ...section(5, [1, 0, 1]),
    ...section(7, [...leb(exports.length), ...exports.flat()]),
    ...section(10, [1, ...leb(body.length), ...body]),
  ]);
}
function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0)) return [...out, b];
    out.push(b | 0x80);
  }
}

describe("ABI version check", () => {
  it("should accept the fake module's shape when the version matches (the probe is sound)", () => {
    const core = instantiateCore(new WebAssembly.Module(fakeCore(ABI_VERSION, EXPORT_NAMES)));
    expect(core.abi_version()).toBe(ABI_VERSION);
  });

  it("should refuse another version with a typed error", async () => {
    expect(() => instantiateCore(new WebAssembly.Module(fakeCore(999, EXPORT_NAMES)))).toThrow(
      expect.objectContaining({ code: "KVGATE_ERR_WASM_ABI", message: expect.stringContaining(`ABI 999, expected ${ABI_VERSION}`) }),
    );
    await expect(createIndex(fakeCore(ABI_VERSION + 1, EXPORT_NAMES))).rejects.toMatchObject({ code: "KVGATE_ERR_WASM_ABI" });
  });

  it("should refuse a module lacking an export", () => {
    expect(() => instantiateCore(new WebAssembly.Module(fakeCore(ABI_VERSION, EXPORT_NAMES.filter((n) => n !== "route"))))).toThrow(
      expect.objectContaining({ code: "KVGATE_ERR_WASM_ABI", message: expect.stringContaining('lacks export "route"') }),
    );
  });
});
