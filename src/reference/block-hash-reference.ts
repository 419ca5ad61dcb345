/** @module Reference block hashing (local, chained, salted, multimodal, Eagle) over the BigInt XXH3: the oracle for the WASM prompt hash. */
import { xxh3Reference } from "./xxh3-reference.ts";
import { BASE_SEED, type HashOptions } from "../core/hash-seeds.ts";

const encoder = new TextEncoder();

export function seedReference(lora?: string, namespace?: string): bigint {
  let s = BASE_SEED;
  if (lora) s += xxh3Reference(encoder.encode(lora), 0n);
  if (namespace) s += xxh3Reference(encoder.encode(namespace), 1n);
  return BigInt.asUintN(64, s);
}

function le32(tokens: ArrayLike<number>, from: number, to: number): Uint8Array {
  const out = new Uint8Array((to - from) * 4);
  const v = new DataView(out.buffer);
  for (let i = from; i < to; i++) v.setUint32((i - from) * 4, tokens[i]!, true);
  return out;
}

/** seq[i] = XXH3(le64(seq[i-1]) ‖ le64(local[i]), 1337); seq[0] = local[0]. */
export function chainReference(local: readonly bigint[]): bigint[] {
  const seq: bigint[] = [];
  for (let i = 0; i < local.length; i++) {
    if (i === 0) {
      seq.push(local[0]!);
      continue;
    }
    const b = new Uint8Array(16);
    const v = new DataView(b.buffer);
    v.setBigUint64(0, seq[i - 1]!, true);
    v.setBigUint64(8, local[i]!, true);
    seq.push(xxh3Reference(b, BASE_SEED));
  }
  return seq;
}

export function hashPromptReference(tokens: ArrayLike<number>, opts: HashOptions): { local: bigint[]; seq: bigint[] } {
  const bs = opts.blockSize;
  const seed = seedReference(opts.lora, opts.namespace);
  const n = opts.eagle ? (tokens.length > 0 ? Math.floor((tokens.length - 1) / bs) : 0) : Math.floor(tokens.length / bs);
  const window = opts.eagle ? bs + 1 : bs;
  const local: bigint[] = [];
  for (let i = 0; i < n; i++) {
    let bytes = le32(tokens, i * bs, i * bs + window);
    const mm = (opts.multimodal ?? []).filter((m) => m.block === i).map((m) => BigInt.asUintN(64, m.hash)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    if (mm.length > 0) {
      const withMm = new Uint8Array(bytes.length + 8 * mm.length);
      withMm.set(bytes);
      const v = new DataView(withMm.buffer);
      mm.forEach((h, k) => v.setBigUint64(bytes.length + 8 * k, h, true));
      bytes = withMm;
    }
    local.push(xxh3Reference(bytes, seed));
  }
  return { local, seq: chainReference(local) };
}
