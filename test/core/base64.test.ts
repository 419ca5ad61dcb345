/** toBase64 against btoa (the definition) on random bytes of every length class, in both alphabets; fromBase64 undoes it. */
import { describe, expect, it } from "vitest";
import { fromBase64, toBase64 } from "../../src/core/base64.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";

function viaBtoa(bytes: Uint8Array, url: boolean): string {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  const s = btoa(bin);
  return url ? s.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "") : s;
}

describe("toBase64", () => {
  it("should equal btoa's encoding, and its URL-safe unpadded form, for 2,000 random byte strings", () => {
    const rnd = seededRandom(64);
    for (let k = 0; k < 2_000; k++) {
      const bytes = new Uint8Array(k < 10 ? k : rnd.int(1_500));
      for (let i = 0; i < bytes.length; i++) bytes[i] = rnd.int(256);
      for (const url of [false, true]) {
        const s = toBase64(bytes, url);
        expect(s, `length ${bytes.length}, url ${url}`).toBe(viaBtoa(bytes, url));
        expect(fromBase64(s, url)).toEqual(bytes);
      }
    }
  });

  it("should encode a view, not its whole buffer", () => {
    const buf = new Uint8Array([0xff, 0xfb, 0xbf, 0x00, 0x01]);
    expect(toBase64(buf.subarray(1, 4))).toBe("+78A");
    expect(toBase64(buf.subarray(1, 4), true)).toBe("-78A");
  });

  it("should refuse what is not base64", () => {
    expect(() => fromBase64("ab$d")).toThrow();
    expect(() => fromBase64("abcde")).toThrow();
  });
});
