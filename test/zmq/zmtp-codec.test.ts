/**
 * @module The ZMTP wire format without sockets: exact greeting and frame bytes, the short/long boundary, decoding
 * whatever way the bytes are split, limits enforced from the header alone, and seeded fuzzing that may only ever
 * produce frames or a ZmtpError.
 */
import { describe, expect, it } from "vitest";
import {
  encodeCommand, encodeFrames, encodeGreeting, encodeReady, parseCommand, parseGreeting, parseMetadata, ZmtpDecoder, ZmtpError,
  type DecodedFrame, type ZmtpLimits,
} from "../../src/zmq/zmtp-codec.ts";

const LIMITS: ZmtpLimits = { maxMessageBytes: 1 << 20, maxFrames: 64, maxCommandBytes: 4096 };

/** Deterministic pseudo-random numbers (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function drain(d: ZmtpDecoder): DecodedFrame[] {
  const out: DecodedFrame[] = [];
  for (let f = d.next(); f; f = d.next()) out.push(f);
  return out;
}

describe("ZMTP encoding", () => {
  it("should write the 64-byte greeting of ZMTP 3.1 with the NULL mechanism", () => {
    const g = encodeGreeting();
    expect(g.length).toBe(64);
    expect([...g.subarray(0, 12)]).toEqual([0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 1]);
    expect(Buffer.from(g.subarray(12, 32)).toString("latin1")).toBe("NULL" + "\0".repeat(16));
    expect(g.subarray(32).every((b) => b === 0)).toBe(true);
    expect(parseGreeting(g)).toEqual({ major: 3, minor: 1, mechanism: "NULL" });
  });

  it("should use a 1-byte size up to 255 bytes and an 8-byte size from 256, with MORE on all but the last frame", () => {
    const out = encodeFrames([new Uint8Array(255), new Uint8Array(256), new Uint8Array(0)]);
    expect([out[0], out[1]]).toEqual([0x01, 255]);
    expect([...out.subarray(257, 266)]).toEqual([0x03, 0, 0, 0, 0, 0, 0, 1, 0]);
    expect([...out.subarray(266 + 256)]).toEqual([0x00, 0]);
    expect([...encodeCommand("PING", new Uint8Array([0, 1]))]).toEqual([0x04, 7, 4, 80, 73, 78, 71, 0, 1]);
  });

  it("should round-trip READY metadata, property names case-insensitively", () => {
    const ready = encodeReady({ "Socket-Type": new TextEncoder().encode("DEALER"), Identity: new Uint8Array(0) });
    const d = new ZmtpDecoder(LIMITS);
    d.push(ready);
    const [f] = drain(d);
    const cmd = parseCommand(f!.body);
    expect(cmd.name).toBe("READY");
    const props = parseMetadata(cmd.data);
    expect(Buffer.from(props.get("socket-type")!).toString()).toBe("DEALER");
    expect(props.get("identity")!.length).toBe(0);
  });

  it("should accept greetings of ZMTP 3.0 and later 3.x/4.x peers, refusing 2.0 and non-NULL mechanisms", () => {
    expect(parseGreeting(encodeGreeting(0)).minor).toBe(0);
    const v4 = encodeGreeting();
    v4[10] = 4;
    expect(parseGreeting(v4).major).toBe(4);
    const v2 = encodeGreeting();
    v2[10] = 1;
    expect(() => parseGreeting(v2)).toThrow(expect.objectContaining({ reason: "bad-version" }));
    const curve = encodeGreeting();
    curve.set(new TextEncoder().encode("CURVE"), 12);
    expect(() => parseGreeting(curve)).toThrow(expect.objectContaining({ reason: "bad-mechanism" }));
  });
});

describe("ZMTP decoding", () => {
  it("should decode the same frames whichever way the bytes are split (seeded)", () => {
    const r = rng(42);
    const bodies = Array.from({ length: 200 }, (_, i) => {
      const size = [0, 1, 254, 255, 256, 257, 3000][i % 7]!;
      return Uint8Array.from({ length: size }, (_, k) => (i + k) & 0xff);
    });
    const wire = Buffer.concat([encodeGreeting(), ...bodies.map((b, i) => encodeFrames(i % 3 === 2 ? [b] : [b, new Uint8Array([i & 0xff])]))]);
    const expected: Uint8Array[] = bodies.flatMap((b, i) => (i % 3 === 2 ? [b] : [b, new Uint8Array([i & 0xff])]));
    for (const maxPiece of [1, 2, 9, 64, 1000, 70_000]) {
      const d = new ZmtpDecoder(LIMITS);
      const got: Uint8Array[] = [];
      let greeted = false;
      for (let o = 0; o < wire.length;) {
        const n = Math.min(wire.length - o, 1 + Math.floor(r() * maxPiece));
        d.push(wire.subarray(o, o + n));
        o += n;
        if (!greeted) greeted = d.greeting() !== null;
        if (greeted) for (const f of drain(d)) got.push(f.body);
      }
      expect(got.length).toBe(expected.length);
      got.forEach((b, i) => expect(Buffer.from(b).equals(expected[i]!), `frame ${i}, pieces ≤ ${maxPiece}`).toBe(true));
      expect(d.buffered).toBe(0);
    }
  });

  it("should view a frame whole inside the chunk, and copy one split across chunks", () => {
    const d = new ZmtpDecoder(LIMITS);
    d.push(encodeGreeting());
    d.greeting();
    const chunk = encodeFrames([new Uint8Array([1, 2, 3])]);
    d.push(chunk);
    const [f] = drain(d);
    expect(f!.body.buffer).toBe(chunk.buffer);
    expect([...f!.body]).toEqual([1, 2, 3]);
    const split = encodeFrames([new Uint8Array([4, 5, 6])]);
    d.push(split.subarray(0, 3));
    expect(d.next()).toBeNull();
    d.push(split.subarray(3));
    const [g] = drain(d);
    expect(g!.body.buffer).not.toBe(split.buffer);
    expect([...g!.body]).toEqual([4, 5, 6]);
  });

  it("should decode every frame exactly when each read lands in one reused buffer that is released and overwritten (seeded)", () => {
    const r = rng(99);
    const bodies = Array.from({ length: 300 }, (_, i) => {
      const size = [0, 1, 200, 255, 256, 1000, 5000, 20_000][i % 8]!;
      return Uint8Array.from({ length: size }, (_, k) => (i * 7 + k) & 0xff);
    });
    const wire = Buffer.concat([encodeGreeting(), ...bodies.map((b, i) => encodeFrames(i % 3 === 0 ? [b] : [new Uint8Array([i & 0xff]), b]))]);
    const expected: Uint8Array[] = bodies.flatMap((b, i) => (i % 3 === 0 ? [b] : [new Uint8Array([i & 0xff]), b]));
    for (const readSize of [7, 300, 4096, 65_536]) {
      const buffer = new Uint8Array(readSize);
      const d = new ZmtpDecoder(LIMITS);
      const got: Uint8Array[] = [];
      let greeted = false, views = 0;
      for (let o = 0; o < wire.length;) {
        const n = Math.min(wire.length - o, 1 + Math.floor(r() * readSize));
        buffer.set(wire.subarray(o, o + n));
        o += n;
        d.push(buffer.subarray(0, n));
        if (!greeted) greeted = d.greeting() !== null;
        if (greeted) {
          for (const f of drain(d)) {
            if (f.body.buffer === buffer.buffer) views++;
            got.push(f.body.slice());
          }
        }
        d.release();
        buffer.fill(0xee);
      }
      expect(got.length).toBe(expected.length);
      got.forEach((b, i) => expect(Buffer.from(b).equals(expected[i]!), `frame ${i}, reads of ≤ ${readSize} bytes`).toBe(true));
      expect(d.buffered).toBe(0);
      if (readSize >= 4096) expect(views).toBeGreaterThan(expected.length / 4);
    }
  });

  it("should refuse an oversized frame from its header alone, before any of its body arrived", () => {
    const d = new ZmtpDecoder(LIMITS);
    d.push(encodeGreeting());
    d.greeting();
    d.push(new Uint8Array([0x02, 0, 0, 0, 0, 0, 0x10, 0, 1]));
    expect(() => d.next()).toThrow(expect.objectContaining({ reason: "frame-too-large" }));
  });

  it("should allocate a large body as its bytes arrive, not from the length the header claims", () => {
    const d = new ZmtpDecoder({ ...LIMITS, maxMessageBytes: 1 << 30 });
    d.push(encodeGreeting());
    d.greeting();
    const before = process.memoryUsage().arrayBuffers;
    // Claims 64 MiB, sends 10 bytes.
    d.push(new Uint8Array([0x02, 0, 0, 0, 0, 0x04, 0, 0, 0, ...new Array(10).fill(1)]));
    expect(d.next()).toBeNull();
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(1 << 20);
    // The rest arrives in pieces: the body is complete and exact.
    const piece = new Uint8Array(1 << 20).fill(1);
    for (let left = (1 << 26) - 10; left > 0; left -= piece.length) d.push(left >= piece.length ? piece : piece.subarray(0, left));
    const f = d.next();
    expect(f!.body.length).toBe(1 << 26);
    expect(f!.body[0]).toBe(1);
    expect(f!.body[(1 << 26) - 1]).toBe(1);
  });

  it("should count a multipart message's frames and bytes together, and reset them after the last frame", () => {
    const d = new ZmtpDecoder({ ...LIMITS, maxMessageBytes: 1000, maxFrames: 3 });
    d.push(encodeGreeting());
    d.greeting();
    // Three messages of 3 × 300 bytes fit; one of 4 frames does not.
    for (let i = 0; i < 3; i++) d.push(encodeFrames([new Uint8Array(300), new Uint8Array(300), new Uint8Array(300)]));
    expect(drain(d)).toHaveLength(9);
    d.push(encodeFrames([new Uint8Array(1), new Uint8Array(1), new Uint8Array(1), new Uint8Array(1)]));
    expect(() => drain(d)).toThrow(expect.objectContaining({ reason: "too-many-frames" }));
    const big = new ZmtpDecoder({ ...LIMITS, maxMessageBytes: 1000 });
    big.push(encodeGreeting());
    big.greeting();
    big.push(encodeFrames([new Uint8Array(600), new Uint8Array(600)]));
    expect(() => drain(big)).toThrow(expect.objectContaining({ reason: "frame-too-large" }));
  });

  it("should fail fast on the first byte of a non-ZMTP peer", () => {
    const d = new ZmtpDecoder(LIMITS);
    d.push(new TextEncoder().encode("G"));
    expect(() => d.greeting()).toThrow(expect.objectContaining({ reason: "bad-signature" }));
  });

  it("should only ever yield frames or throw a ZmtpError on random bytes after a valid greeting (seeded)", () => {
    const r = rng(7);
    let errors = 0, frames = 0;
    for (let round = 0; round < 2_000; round++) {
      const d = new ZmtpDecoder({ maxMessageBytes: 4096, maxFrames: 8, maxCommandBytes: 512 });
      d.push(encodeGreeting());
      d.greeting();
      const junk = Uint8Array.from({ length: 1 + Math.floor(r() * 64) }, () => {
        // Bias towards small sizes and valid flag values so that frames are often well-formed.
        const x = r();
        return x < 0.3 ? Math.floor(r() * 8) : x < 0.5 ? Math.floor(r() * 16) : Math.floor(r() * 256);
      });
      d.push(junk);
      try {
        frames += drain(d).length;
      } catch (e) {
        expect(e).toBeInstanceOf(ZmtpError);
        errors++;
      }
      expect(d.buffered).toBeLessThanOrEqual(junk.length);
    }
    expect(errors).toBeGreaterThan(0);
    expect(frames).toBeGreaterThan(0);
  });
});
