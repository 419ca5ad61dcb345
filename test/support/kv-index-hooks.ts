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

/** Fault injection for tests of the recovery path: a trap inside the core. */
export function induceTrap(index: KvIndex): never {
  index.withCore("debug_trap", (c) => c.debug_trap());
  throw new KvgateError("KVGATE_ERR_STATE", "debug_trap returned");
}
