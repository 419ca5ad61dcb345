/**
 * @module Recycled storage for the sequence-hash keys each live booking holds. A fresh 4 KB typed array per 8k-token
 * request costs more than the rest of booking (an off-heap backing store, tracked and swept by the GC), so buffers
 * are reused by power-of-two size class. What the pool keeps idle is capped, so memory follows the live bookings.
 */

/** Smallest class: 64 words (32 blocks); smaller prompts share it. */
const MIN_CLASS = 6;

export class KeyPool {
  /** Idle buffers per size class (index = log2 of the word count). */
  readonly #free: ArrayBuffer[][] = [];
  #idle = 0;

  /** @param maxIdle buffers kept for reuse across all classes; beyond it a released buffer is left to the GC. */
  constructor(private readonly maxIdle = 1024) {}

  /** Buffers waiting for reuse. */
  get idle(): number {
    return this.#idle;
  }

  /** A copy of the first `words` words of `src`, in pooled storage; give it back with `release` when done. */
  copy(src: Uint32Array, words: number): Uint32Array {
    const cls = classOf(words);
    const buf = this.#free[cls]?.pop();
    let out: Uint32Array;
    if (buf) {
      this.#idle--;
      out = new Uint32Array(buf, 0, words);
    } else {
      out = new Uint32Array(new ArrayBuffer(4 << cls), 0, words);
    }
    out.set(words === src.length ? src : src.subarray(0, words));
    return out;
  }

  /** Returns a buffer from `copy`; the caller must not use `keys` afterwards. */
  release(keys: Uint32Array): void {
    if (this.#idle >= this.maxIdle) return;
    const buf = keys.buffer as ArrayBuffer;
    const cls = Math.log2(buf.byteLength >>> 2);
    // Only buffers this pool made (whole power-of-two classes) come back; anything else is left to the GC.
    if (!Number.isInteger(cls) || cls < MIN_CLASS || keys.byteOffset !== 0) return;
    (this.#free[cls] ??= []).push(buf);
    this.#idle++;
  }
}

function classOf(words: number): number {
  return words <= 1 << MIN_CLASS ? MIN_CLASS : 32 - Math.clz32(words - 1);
}
