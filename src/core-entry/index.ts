/**
 * @module kvgate/core: the block index and prompt hashing alone, for any JS host (browser, Node, Bun, Deno, Workers);
 * no gateway, Hono or runtime API. The host hands over the WASM core (module, bytes, Response or URL).
 */
import { KvIndex } from "../core/kv-index.ts";
import type { KvIndexOptions } from "../core/kv-index-options.ts";
import { compileCore, type CoreSource } from "../wasm/module-host.ts";

export { KvIndex, type BlockMatch, type OverlapScores, type StoredBlock, type StoreOutcome, type HashOptions } from "../core/kv-index.ts";
export type { KvIndexOptions } from "../core/kv-index-options.ts";
export { KvgateError, WasmTrapError, isKvgateError, type ErrorCode } from "../core/errors.ts";
export { EventBatchWriter, EventKind } from "../core/event-encoder.ts";
export { scoreCandidates, type ScoreCandidate, type ScoreRequest, type ScoreResult } from "../core/score-kernel.ts";
export { ABI_VERSION, Status } from "../wasm/abi.ts";
export { compileCore, defaultCoreUrl, type CoreSource } from "../wasm/module-host.ts";

/** A KvIndex over the core from `source`; the ABI version is checked (KVGATE_ERR_WASM_ABI on mismatch). */
export async function createIndex(source: CoreSource, options: KvIndexOptions = {}): Promise<KvIndex> {
  return new KvIndex(await compileCore(source), options);
}
