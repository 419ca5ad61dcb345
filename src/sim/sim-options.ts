/** @module Options of a simulated engine, their defaults (vLLM's and the Dynamo mocker's where they apply) and validation. */
import { KvgateError } from "../core/errors.ts";

export interface SimEngineOptions {
  /** Served model name (`/v1/models`, response `model`). Default "kvgate-sim". */
  model?: string;
  /** LoRA adapters served beside the model, each under its own model name (vLLM `--lora-modules`). Default none. */
  loraAdapters?: string[];
  /** Worker id put on KV-event batches (`x-kvgate-worker`). Default "sim-0". */
  workerId?: string;
  /** Data-parallel rank this engine stands for (`data_parallel_rank` of each batch). Default 0. */
  dpRank?: number;
  /** KV blocks in the paged cache. Default 16,384 (the mocker's). */
  numGpuBlocks?: number;
  /** Tokens per KV block. Default 16 (vLLM's default and kvgate's default fleet). */
  blockSize?: number;
  /** Sequences running at once. Default 256. */
  maxNumSeqs?: number;
  /** Tokens computed per engine step, prefill chunks and decodes together. Default 8,192. */
  maxNumBatchedTokens?: number;
  /** Longest prompt + output, in tokens. Default 32,768. */
  maxModelLen?: number;
  /** Reuse cached blocks across requests (and publish KV events). Default true, as in vLLM V1. */
  enablePrefixCaching?: boolean;
  /** Split a long prefill over several steps. Default true. */
  enableChunkedPrefill?: boolean;
  /** Divides every step time (the mocker's speedup_ratio). Default 1. */
  speedupRatio?: number;
  /** Further divides decode time only. Default 1. */
  decodeSpeedupRatio?: number;
  /** Output length when a request gives no max_tokens. Default 32 (vLLM would use the rest of the context). */
  defaultMaxTokens?: number;
  /**
   * Disaggregated serving role (src/sim/disagg-sim.ts): "prefill" keeps a finished request's KV for a remote decode
   * (vLLM `do_remote_decode`, SGLang bootstrap room), "decode" reads it first (vLLM `do_remote_prefill`, SGLang
   * bootstrap). "aggregated" ignores those fields, as an engine without a KV connector does. Default "aggregated".
   */
  role?: SimRole;
  /** Prefill: how long KV kept for a remote decode waits to be read before it is released (vLLM's abort timeout 480 s). */
  kvTransferTimeoutMs?: number;
  /** Decode (SGLang flow): how long to wait for the prefill of a bootstrap room before failing the request. */
  bootstrapTimeoutMs?: number;
}

export type SimRole = "aggregated" | "prefill" | "decode";

export type ResolvedSimOptions = Required<SimEngineOptions>;

export const SIM_DEFAULTS: ResolvedSimOptions = {
  model: "kvgate-sim",
  loraAdapters: [],
  workerId: "sim-0",
  dpRank: 0,
  numGpuBlocks: 16_384,
  blockSize: 16,
  maxNumSeqs: 256,
  maxNumBatchedTokens: 8_192,
  maxModelLen: 32_768,
  enablePrefixCaching: true,
  enableChunkedPrefill: true,
  speedupRatio: 1,
  decodeSpeedupRatio: 1,
  defaultMaxTokens: 32,
  role: "aggregated",
  kvTransferTimeoutMs: 480_000,
  bootstrapTimeoutMs: 60_000,
};

function int(name: string, v: number, min: number, max: number): void {
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${name} must be an integer in ${min}..${max}, got ${v}`);
  }
}

export function resolveSimOptions(o: SimEngineOptions = {}): ResolvedSimOptions {
  const defined = Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
  const r = { ...SIM_DEFAULTS, ...defined } as ResolvedSimOptions;
  if (typeof r.model !== "string" || r.model.length === 0) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "model must be a non-empty string");
  if (!Array.isArray(r.loraAdapters) || !r.loraAdapters.every((a) => typeof a === "string" && a.length > 0 && a !== r.model)) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "loraAdapters must be non-empty names other than the model");
  }
  if (typeof r.workerId !== "string" || r.workerId.length === 0) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "workerId must be a non-empty string");
  int("dpRank", r.dpRank, 0, 65_535);
  int("numGpuBlocks", r.numGpuBlocks, 1, 1 << 24);
  int("blockSize", r.blockSize, 1, 1 << 16);
  int("maxNumSeqs", r.maxNumSeqs, 1, 1 << 20);
  int("maxNumBatchedTokens", r.maxNumBatchedTokens, 1, 1 << 24);
  int("maxModelLen", r.maxModelLen, 2, 1 << 24);
  int("defaultMaxTokens", r.defaultMaxTokens, 1, 1 << 24);
  if (!["aggregated", "prefill", "decode"].includes(r.role)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `role must be aggregated, prefill or decode, got ${String(r.role)}`);
  int("kvTransferTimeoutMs", r.kvTransferTimeoutMs, 1, 86_400_000);
  int("bootstrapTimeoutMs", r.bootstrapTimeoutMs, 1, 86_400_000);
  for (const k of ["speedupRatio", "decodeSpeedupRatio"] as const) {
    if (!(typeof r[k] === "number" && r[k] > 0 && Number.isFinite(r[k]))) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${k} must be a positive number, got ${r[k]}`);
    }
  }
  // Without chunked prefill a prompt must fit one step's token budget, or it could never be scheduled.
  if (!r.enableChunkedPrefill && r.maxNumBatchedTokens < r.maxModelLen) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "without chunked prefill, maxNumBatchedTokens must be at least maxModelLen");
  }
  return r;
}
