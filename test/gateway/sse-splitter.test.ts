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

  it("should cut random streams where a byte-by-byte reference cuts them, whatever the chunking", () => {
    /** Every event end in `text`, found one position at a time with the three blank-line forms. */
    const reference = (text: string): string[] => {
      const out: string[] = [];
      let start = 0;
      for (let i = 0; i < text.length; i++) {
        const rest = text.slice(i, i + 4);
        const end = rest.startsWith("\n\n") || rest.startsWith("\r\r") ? i + 2 : rest === "\r\n\r\n" ? i + 4 : -1;
        if (end < 0) continue;
        out.push(text.slice(start, end));
        start = end;
        i = end - 1;
      }
      return out;
    };
    const rnd = seededRandom(11);
    const pieces = ["data: ", '{"x":1}', "\n", "\n\n", "\r\n", "\r", ": ping", "data: [DONE]", "é", "event: e"];
    for (let trial = 0; trial < 500; trial++) {
      const lfOnly = trial % 2 === 0;
      let text = "";
      for (let k = 0, n = 1 + rnd.int(40); k < n; k++) {
        const p = pieces[rnd.int(pieces.length)]!;
        text += lfOnly ? p.replace(/\r/g, "") : p;
      }
      const bytes = enc.encode(text);
      const s = new SseSplitter();
      const got: string[] = [];
      for (let at = 0; at < bytes.length;) {
        const n = 1 + rnd.int(24);
        for (const e of s.push(bytes.slice(at, at + n))) got.push(dec.decode(e.raw));
        at += n;
      }
      const want = reference(text);
      expect(got).toEqual(want);
      expect(s.pendingBytes).toBe(bytes.length - enc.encode(want.join("")).length);
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
