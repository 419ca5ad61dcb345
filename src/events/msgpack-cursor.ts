/**
 * @module A bounds-checked msgpack reader that walks bytes in place, so the event decoder reads hashes and token ids
 * straight into typed arrays instead of building a JS object tree.
 */
import { KvgateError } from "../core/errors.ts";

/** Nesting deeper than this is refused (a crafted frame must not blow the stack or loop for long). */
const MAX_SKIP_DEPTH = 64;

export function corruptEvent(msg: string): KvgateError {
  return new KvgateError("KVGATE_ERR_CORRUPT_EVENT", `KV event batch: ${msg}`);
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

export class MsgpackCursor {
  buf: Uint8Array = new Uint8Array(0);
  view: DataView = new DataView(new ArrayBuffer(0));
  pos = 0;
  end = 0;

  reset(buf: Uint8Array): this {
    this.buf = buf;
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    this.pos = 0;
    this.end = buf.byteLength;
    return this;
  }

  /** The type code at the cursor, without moving. */
  peek(): number {
    if (this.pos >= this.end) throw corruptEvent("truncated");
    return this.buf[this.pos]!;
  }

  #need(n: number): void {
    if (this.end - this.pos < n) throw corruptEvent("truncated");
  }

  isNil(): boolean {
    return this.peek() === 0xc0;
  }

  isArray(): boolean {
    const c = this.peek();
    return (c & 0xf0) === 0x90 || c === 0xdc || c === 0xdd;
  }

  isMap(): boolean {
    const c = this.peek();
    return (c & 0xf0) === 0x80 || c === 0xde || c === 0xdf;
  }

  isStr(): boolean {
    const c = this.peek();
    return (c & 0xe0) === 0xa0 || c === 0xd9 || c === 0xda || c === 0xdb;
  }

  /** True for any msgpack integer (positive or negative, any width). */
  isInt(): boolean {
    const c = this.peek();
    return c <= 0x7f || c >= 0xe0 || (c >= 0xcc && c <= 0xd3);
  }

  /** Array header: the element count. Each element takes at least one byte, so counts beyond the buffer are refused. */
  array(): number {
    const c = this.peek();
    let n: number;
    if ((c & 0xf0) === 0x90) { n = c & 0x0f; this.pos++; }
    else if (c === 0xdc) { this.#need(3); n = this.view.getUint16(this.pos + 1); this.pos += 3; }
    else if (c === 0xdd) { this.#need(5); n = this.view.getUint32(this.pos + 1); this.pos += 5; }
    else throw corruptEvent(`expected an array, found type 0x${c.toString(16)}`);
    if (n > this.end - this.pos) throw corruptEvent("array longer than the frame");
    return n;
  }

  map(): number {
    const c = this.peek();
    let n: number;
    if ((c & 0xf0) === 0x80) { n = c & 0x0f; this.pos++; }
    else if (c === 0xde) { this.#need(3); n = this.view.getUint16(this.pos + 1); this.pos += 3; }
    else if (c === 0xdf) { this.#need(5); n = this.view.getUint32(this.pos + 1); this.pos += 5; }
    else throw corruptEvent(`expected a map, found type 0x${c.toString(16)}`);
    if (n * 2 > this.end - this.pos) throw corruptEvent("map longer than the frame");
    return n;
  }

  /** A str header: moves past it and returns the byte length of the UTF-8 that follows. */
  strLength(): number {
    const c = this.peek();
    let n: number;
    if ((c & 0xe0) === 0xa0) {
      n = c & 0x1f;
      if (this.end - ++this.pos < n) throw corruptEvent("truncated");
      return n;
    }
    else if (c === 0xd9) { this.#need(2); n = this.buf[this.pos + 1]!; this.pos += 2; }
    else if (c === 0xda) { this.#need(3); n = this.view.getUint16(this.pos + 1); this.pos += 3; }
    else if (c === 0xdb) { this.#need(5); n = this.view.getUint32(this.pos + 1); this.pos += 5; }
    else throw corruptEvent(`expected a string, found type 0x${c.toString(16)}`);
    this.#need(n);
    return n;
  }

  str(): string {
    const n = this.strLength();
    const at = this.pos;
    this.pos += n;
    // Short ASCII (tags, keys, medium names) without TextDecoder's per-call overhead.
    if (n <= 32) {
      let s = "";
      for (let i = 0; i < n; i++) {
        const b = this.buf[at + i]!;
        if (b >= 0x80) return this.#utf8(at, n);
        s += String.fromCharCode(b);
      }
      return s;
    }
    return this.#utf8(at, n);
  }

  #utf8(at: number, n: number): string {
    try {
      return utf8.decode(this.buf.subarray(at, at + n));
    } catch {
      throw corruptEvent("string is not valid UTF-8");
    }
  }

  /**
   * Reads a str and returns the index of the first entry of `keys` (pre-encoded UTF-8) equal to it, or -1. Map keys
   * are compared as bytes so the common case allocates nothing.
   */
  key(keys: readonly Uint8Array[]): number {
    const n = this.strLength();
    const at = this.pos, buf = this.buf;
    this.pos += n;
    for (let k = 0; k < keys.length; k++) {
      const key = keys[k]!;
      if (key.length !== n) continue;
      let i = 0;
      while (i < n && key[i] === buf[at + i]) i++;
      if (i === n) return k;
    }
    return -1;
  }

  /** An integer in 0..2^53-1 (token ids, block sizes, ranks). Negative or wider values are refused. */
  uint(): number {
    const c = this.peek();
    const v = this.view;
    const p = this.pos;
    if (c <= 0x7f) { this.pos = p + 1; return c; }
    switch (c) {
      case 0xcc: this.#need(2); this.pos = p + 2; return this.buf[p + 1]!;
      case 0xcd: this.#need(3); this.pos = p + 3; return v.getUint16(p + 1);
      case 0xce: this.#need(5); this.pos = p + 5; return v.getUint32(p + 1);
      case 0xcf: {
        this.#need(9);
        const hi = v.getUint32(p + 1);
        if (hi >= 0x200000) throw corruptEvent("integer beyond 2^53");
        this.pos = p + 9;
        return hi * 0x100000000 + v.getUint32(p + 5);
      }
      case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
        const x = this.int();
        if (x < 0) throw corruptEvent(`negative integer ${x} where a count or id was expected`);
        return x;
      }
      default: throw corruptEvent(`expected an unsigned integer, found type 0x${c.toString(16)}`);
    }
  }

  /** Any integer within ±2^53. */
  int(): number {
    const c = this.peek();
    const v = this.view;
    const p = this.pos;
    if (c >= 0xe0) { this.pos = p + 1; return c - 0x100; }
    switch (c) {
      case 0xd0: this.#need(2); this.pos = p + 2; return v.getInt8(p + 1);
      case 0xd1: this.#need(3); this.pos = p + 3; return v.getInt16(p + 1);
      case 0xd2: this.#need(5); this.pos = p + 5; return v.getInt32(p + 1);
      case 0xd3: {
        this.#need(9);
        const hi = v.getInt32(p + 1);
        if (hi >= 0x200000 || hi < -0x200000) throw corruptEvent("integer beyond 2^53");
        this.pos = p + 9;
        return hi * 0x100000000 + v.getUint32(p + 5);
      }
      default: return this.uint();
    }
  }

  /** A float64/float32, or an integer where a float was expected (lenient: some encoders shorten whole numbers). */
  float(): number {
    const c = this.peek();
    if (c === 0xcb) { this.#need(9); const x = this.view.getFloat64(this.pos + 1); this.pos += 9; return x; }
    if (c === 0xca) { this.#need(5); const x = this.view.getFloat32(this.pos + 1); this.pos += 5; return x; }
    if (this.isInt()) return this.int();
    throw corruptEvent(`expected a number, found type 0x${c.toString(16)}`);
  }

  /**
   * A 64-bit block hash written as (low, high) unsigned 32-bit words into `out[at]`, `out[at + 1]`. uint64 and
   * negative int64 share the bit pattern (two's complement fold, SGLang's signed hashes); shorter signed forms are
   * sign-extended; `bin` keeps its last 8 bytes (vLLM's rule for raw 32-byte digests).
   */
  hash(out: Uint32Array, at: number): void {
    const c = this.peek();
    const v = this.view;
    const p = this.pos;
    let lo: number, hi = 0;
    if (c <= 0x7f) { lo = c; this.pos = p + 1; }
    else if (c >= 0xe0) { lo = (c - 0x100) >>> 0; hi = 0xffffffff; this.pos = p + 1; }
    else {
      switch (c) {
        case 0xcc: this.#need(2); lo = this.buf[p + 1]!; this.pos = p + 2; break;
        case 0xcd: this.#need(3); lo = v.getUint16(p + 1); this.pos = p + 3; break;
        case 0xce: this.#need(5); lo = v.getUint32(p + 1); this.pos = p + 5; break;
        case 0xcf: case 0xd3: this.#need(9); hi = v.getUint32(p + 1); lo = v.getUint32(p + 5); this.pos = p + 9; break;
        case 0xd0: { this.#need(2); const x = v.getInt8(p + 1); lo = x >>> 0; hi = x < 0 ? 0xffffffff : 0; this.pos = p + 2; break; }
        case 0xd1: { this.#need(3); const x = v.getInt16(p + 1); lo = x >>> 0; hi = x < 0 ? 0xffffffff : 0; this.pos = p + 3; break; }
        case 0xd2: { this.#need(5); const x = v.getInt32(p + 1); lo = x >>> 0; hi = x < 0 ? 0xffffffff : 0; this.pos = p + 5; break; }
        case 0xc4: case 0xc5: case 0xc6: {
          const n = this.#binLength();
          if (n < 8) throw corruptEvent(`bin block hash of ${n} bytes`);
          const q = this.pos + n - 8;
          hi = v.getUint32(q); lo = v.getUint32(q + 4);
          this.pos += n;
          break;
        }
        default: throw corruptEvent(`expected a block hash, found type 0x${c.toString(16)}`);
      }
    }
    out[at] = lo;
    out[at + 1] = hi;
  }

  #binLength(): number {
    const c = this.peek();
    let n: number;
    if (c === 0xc4) { this.#need(2); n = this.buf[this.pos + 1]!; this.pos += 2; }
    else if (c === 0xc5) { this.#need(3); n = this.view.getUint16(this.pos + 1); this.pos += 3; }
    else { this.#need(5); n = this.view.getUint32(this.pos + 1); this.pos += 5; }
    this.#need(n);
    return n;
  }

  /** Skips one value of any type (iteratively, depth-limited). */
  skip(): void {
    let pending = 1;
    let depth = 0;
    const stack: number[] = [];
    while (pending > 0) {
      pending--;
      const c = this.peek();
      if (this.isArray() || this.isMap()) {
        const n = this.isArray() ? this.array() : this.map() * 2;
        if (++depth > MAX_SKIP_DEPTH) throw corruptEvent("nesting too deep");
        stack.push(pending);
        pending = n;
      } else {
        this.#skipScalar(c);
      }
      while (pending === 0 && stack.length > 0) {
        pending = stack.pop()!;
        depth--;
      }
    }
  }

  #skipScalar(c: number): void {
    if (c <= 0x7f || c >= 0xe0 || c === 0xc0 || c === 0xc2 || c === 0xc3) { this.pos++; return; }
    // (Length first: `this.pos += f()` would read pos before f moves it.)
    if ((c & 0xe0) === 0xa0 || c === 0xd9 || c === 0xda || c === 0xdb) { const n = this.strLength(); this.pos += n; return; }
    let n: number;
    switch (c) {
      case 0xc4: case 0xc5: case 0xc6: { const b = this.#binLength(); this.pos += b; return; }
      case 0xcc: case 0xd0: n = 2; break;
      case 0xcd: case 0xd1: n = 3; break;
      case 0xce: case 0xd2: case 0xca: n = 5; break;
      case 0xcf: case 0xd3: case 0xcb: n = 9; break;
      case 0xd4: n = 3; break;
      case 0xd5: n = 4; break;
      case 0xd6: n = 6; break;
      case 0xd7: n = 10; break;
      case 0xd8: n = 18; break;
      case 0xc7: this.#need(2); n = 3 + this.buf[this.pos + 1]!; break;
      case 0xc8: this.#need(3); n = 4 + this.view.getUint16(this.pos + 1); break;
      case 0xc9: this.#need(5); n = 6 + this.view.getUint32(this.pos + 1); break;
      default: throw corruptEvent(`invalid type code 0x${c.toString(16)}`);
    }
    this.#need(n);
    this.pos += n;
  }
}
