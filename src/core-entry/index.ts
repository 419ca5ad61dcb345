/**
 * @module kvgate/core: the block index and prompt hashing alone, for any JS host (browser, Node, Bun, Deno, Workers);
 * no gateway, Hono or runtime API. The host hands over the WASM core (module, bytes, Response or URL).
 */
import { EmbeddedIndex } from "./embedded-index.ts";
import type { KvIndexOptions } from "../core/kv-index-options.ts";
import { compileCore, type CoreSource } from "../wasm/module-host.ts";

export { KvIndex, type HashOptions } from "../core/kv-index.ts";
export { EmbeddedIndex } from "./embedded-index.ts";
export type { BlockMatch, OverlapScores, StoredBlock, StoreOutcome } from "../core/index-operations.ts";
export type { KvIndexOptions } from "../core/kv-index-options.ts";
export { KvgateError, WasmTrapError, isKvgateError, type ErrorCode } from "../core/errors.ts";
export { EventBatchWriter, EventKind } from "../core/event-encoder.ts";
export { scoreCandidates, type ScoreCandidate, type ScoreRequest, type ScoreResult } from "../core/score-kernel.ts";
export { ABI_VERSION, Status } from "../wasm/abi.ts";
export { compileCore, defaultCoreUrl, type CoreSource } from "../wasm/module-host.ts";

/** A KvIndex over the core from `source`; the ABI version is checked (KVGATE_ERR_WASM_ABI on mismatch). */
export async function createIndex(source: CoreSource, options: KvIndexOptions = {}): Promise<EmbeddedIndex> {
  return new EmbeddedIndex(await compileCore(source), options);
}
