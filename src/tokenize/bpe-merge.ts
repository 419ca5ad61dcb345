/**
 * @module Byte-level BPE for one piece, for the encoder's cache misses: the library's merge loop keys its rank
 * table with `JSON.stringify([a, b])` and allocates a heap node per character, which made never-seen text cost
 * ~6 µs a token. Same algorithm and order — lowest rank first, leftmost on ties — on arrays of token ids.
 */

type Json = Record<string, any>;

const utf8 = new TextEncoder();

export class BpeMerger {
  // Pair (left id, right id) → merge rank, keyed by `left * stride + right`: numbers hash far faster than the
  // concatenated strings the library builds per lookup. `#merged[rank]` is the id of the merged token, -1 when the
  // vocabulary lacks it (the caller then defers to the library, which keeps merging strings).
  readonly #ranks = new Map<number, number>();
  readonly #merged: Int32Array;
  readonly #stride: number;
  readonly #vocab: Map<string, number>;
  readonly #byteIds: Int32Array;
  readonly #byteChars: string[];
  readonly #ignoreMerges: boolean;
  #buf = new Uint8Array(1024);

  private constructor(vocab: Map<string, number>, byteChars: string[], byteIds: Int32Array, mergeCount: number, ignoreMerges: boolean) {
    this.#vocab = vocab;
    this.#byteChars = byteChars;
    this.#byteIds = byteIds;
    this.#merged = new Int32Array(mergeCount);
    let max = 0;
    for (const id of vocab.values()) if (id > max) max = id;
    this.#stride = max + 1;
    this.#ignoreMerges = ignoreMerges;
  }

  /**
   * A merger for this BPE model, or null when it uses features this loop does not reproduce (subword
   * prefixes/suffixes, byte fallback, dropout) or a byte or merge part is missing from the vocabulary.
   */
  static create(model: Json, vocab: Map<string, number>, byteEncoder: Record<number, string>): BpeMerger | null {
    if (model.type !== "BPE" || model.dropout || model.byte_fallback) return null;
    if (model.continuing_subword_prefix || model.end_of_word_suffix) return null;
    const chars: string[] = [];
    const ids = new Int32Array(256);
    for (let b = 0; b < 256; b++) {
      const c = byteEncoder[b];
      const id = typeof c === "string" ? vocab.get(c) : undefined;
      if (c === undefined || id === undefined) return null;
      chars.push(c);
      ids[b] = id;
    }
    const merges: Array<string | [string, string]> = model.merges ?? [];
    const m = new BpeMerger(vocab, chars, ids, merges.length, !!model.ignore_merges);
    for (let i = 0; i < merges.length; i++) {
      const x = merges[i]!;
      const [a, b] = typeof x === "string" ? x.split(" ", 2) : x;
      const ia = a === undefined ? undefined : vocab.get(a);
      const ib = b === undefined ? undefined : vocab.get(b);
      if (ia === undefined || ib === undefined) return null;
      // The library's Map keeps the last rank of a repeated pair; so does this.
      m.#ranks.set(ia * m.#stride + ib, i);
      m.#merged[i] = vocab.get(a! + b!) ?? -1;
    }
    return m;
  }

  /** ids of one pre-tokenizer piece, or undefined when a merge yields a token outside the vocabulary. */
  encode(piece: string): Uint32Array | undefined {
    if (this.#buf.length < piece.length * 3) this.#buf = new Uint8Array(piece.length * 3);
    const { written: n } = utf8.encodeInto(piece, this.#buf);
    if (this.#ignoreMerges) {
      let word = "";
      for (let i = 0; i < n; i++) word += this.#byteChars[this.#buf[i]!];
      const whole = this.#vocab.get(word);
      if (whole !== undefined) return Uint32Array.of(whole);
    }
    const parts: number[] = new Array(n);
    for (let i = 0; i < n; i++) parts[i] = this.#byteIds[this.#buf[i]!]!;
    const stride = this.#stride, ranks = this.#ranks;
    const rank = (a: number, b: number) => ranks.get(a * stride + b) ?? Infinity;
    const pr: number[] = new Array(Math.max(0, n - 1));
    for (let i = 0; i + 1 < n; i++) pr[i] = rank(parts[i]!, parts[i + 1]!);
    while (parts.length > 1) {
      // Lowest rank wins; strict < keeps the leftmost of equal ranks, as the library's position tie-break does.
      let best = Infinity, at = -1;
      for (let i = 0; i < pr.length; i++) {
        if (pr[i]! < best) {
          best = pr[i]!;
          at = i;
        }
      }
      if (at < 0) break;
      const id = this.#merged[best]!;
      if (id < 0) return undefined;
      parts[at] = id;
      parts.splice(at + 1, 1);
      pr.splice(at, 1);
      if (at > 0) pr[at - 1] = rank(parts[at - 1]!, id);
      if (at < parts.length - 1) pr[at] = rank(id, parts[at + 1]!);
    }
    return Uint32Array.from(parts);
  }
}
