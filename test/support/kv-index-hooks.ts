/** @module Test and bench hooks on KvIndex: the embedders' operations, plus the copy floor and fault injection. */
import { KvgateError } from "../../src/core/errors.ts";
import { growPrompt, type KvIndex } from "../../src/core/kv-index.ts";
import { memory } from "../../src/core/index-operations.ts";

export * from "../../src/core/index-operations.ts";

/** Benchmark floor: copies `tokens` into the tokens region as `route` does, and does nothing else. */
export function copyTokens(index: KvIndex, tokens: Uint32Array): void {
  index.withCore("copy_tokens", (c) => {
    if (tokens.length > c.tokens_cap()) growPrompt(c, tokens.length, index.options.maxPromptTokens);
    memory(c).u32.set(tokens, c.tokens_ptr() >>> 2);
  });
}

/** Sequence hashes as the (lo, hi) u32 pairs KvIndex.matchSequenceWords takes. */
export function sequenceWords(seq: readonly bigint[]): Uint32Array {
  const w = new Uint32Array(2 * seq.length);
  for (let i = 0; i < seq.length; i++) {
    const v = BigInt.asUintN(64, seq[i]!);
    w[2 * i] = Number(v & 0xffffffffn);
    w[2 * i + 1] = Number(v >> 32n);
  }
  return w;
}

/** Fault injection for tests of the recovery path: a trap inside the core. */
export function induceTrap(index: KvIndex): never {
  index.withCore("debug_trap", (c) => c.debug_trap());
  throw new KvgateError("KVGATE_ERR_STATE", "debug_trap returned");
}
