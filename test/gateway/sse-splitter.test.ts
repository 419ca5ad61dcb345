import { describe, it, expect } from "vitest";
import { SseSplitter } from "../../src/gateway/sse-splitter.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

describe("SseSplitter", () => {
  it("should return complete events with their exact bytes, whatever the chunking", () => {
    const text = 'data: {"a":1}\n\n: keep-alive\n\ndata: line1\ndata: line2\r\n\r\nevent: x\rdata: y\r\rdata: [DONE]\n\n';
    const bytes = enc.encode(text);
    const rnd = seededRandom(3);
    for (let trial = 0; trial < 200; trial++) {
      const s = new SseSplitter();
      const got: { raw: string; data?: string }[] = [];
      let at = 0;
      while (at < bytes.length) {
        const n = 1 + rnd.int(12);
        for (const e of s.push(bytes.slice(at, at + n))) got.push({ raw: dec.decode(e.raw), data: e.data });
        at += n;
      }
      expect(got.map((g) => g.raw).join("")).toBe(text);
      expect(got.map((g) => g.data)).toEqual(['{"a":1}', undefined, "line1\nline2", "y", "[DONE]"]);
      expect(s.pendingBytes).toBe(0);
    }
  });

  it("should hold back a partial event", () => {
    const s = new SseSplitter();
    expect(s.push(enc.encode('data: {"half'))).toEqual([]);
    expect(s.pendingBytes).toBe(12);
  });

  it("should refuse an event larger than its bound", () => {
    const s = new SseSplitter(16);
    expect(() => s.push(enc.encode("data: " + "x".repeat(32)))).toThrow(RangeError);
  });
});
