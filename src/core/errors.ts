/** @module Typed errors with stable codes, HTTP statuses and OpenAI error types, shared by every layer. */

export type ErrorCode =
  | "KVGATE_ERR_BAD_ARGUMENT"
  | "KVGATE_ERR_UNKNOWN_WORKER"
  | "KVGATE_ERR_SLOTS_EXHAUSTED"
  | "KVGATE_ERR_CAPACITY"
  | "KVGATE_ERR_NO_MEMORY"
  | "KVGATE_ERR_PROMPT_TOO_LONG"
  | "KVGATE_ERR_CORRUPT_EVENT"
  | "KVGATE_ERR_WASM_TRAP"
  | "KVGATE_ERR_WASM_ABI"
  | "KVGATE_ERR_STATE"
  | "KVGATE_ERR_NO_WORKERS"
  | "KVGATE_ERR_ALL_WORKERS_BUSY"
  | "KVGATE_ERR_QUEUE_REJECTED"
  | "KVGATE_ERR_PLAN_NOT_FOUND"
  | "KVGATE_ERR_PLAN_LIMIT"
  | "KVGATE_ERR_SESSION_CONFLICT"
  | "KVGATE_ERR_SESSION_LIMIT"
  | "KVGATE_ERR_CANCELLED"
  | "KVGATE_ERR_TOKENIZER"
  | "KVGATE_ERR_UNKNOWN_MODEL"
  | "KVGATE_ERR_UNKNOWN_ADAPTER"
  | "KVGATE_ERR_ENGINE_BUSY"
  | "KVGATE_ERR_BODY_TOO_LARGE"
  | "KVGATE_ERR_UNAUTHORIZED"
  | "KVGATE_ERR_FORBIDDEN"
  | "KVGATE_ERR_NOT_FOUND"
  | "KVGATE_ERR_UPSTREAM"
  | "KVGATE_ERR_UPSTREAM_TIMEOUT"
  /** A message from another router replica that kvgate cannot read (src/replicas/). */
  | "KVGATE_ERR_SYNC_MESSAGE"
  /** An index snapshot of another format version, or corrupt (src/replicas/snapshot-format.ts): not loaded. */
  | "KVGATE_ERR_SNAPSHOT";

const STATUS: Record<ErrorCode, number> = {
  KVGATE_ERR_BAD_ARGUMENT: 400,
  KVGATE_ERR_UNKNOWN_WORKER: 404,
  KVGATE_ERR_SLOTS_EXHAUSTED: 503,
  KVGATE_ERR_CAPACITY: 503,
  KVGATE_ERR_NO_MEMORY: 500,
  KVGATE_ERR_PROMPT_TOO_LONG: 400,
  KVGATE_ERR_CORRUPT_EVENT: 400,
  KVGATE_ERR_WASM_TRAP: 500,
  KVGATE_ERR_WASM_ABI: 500,
  KVGATE_ERR_STATE: 500,
  KVGATE_ERR_NO_WORKERS: 503,
  KVGATE_ERR_ALL_WORKERS_BUSY: 503,
  KVGATE_ERR_QUEUE_REJECTED: 429,
  // Two-phase routing: no open plan with this id (never made, already completed or cancelled, or expired).
  KVGATE_ERR_PLAN_NOT_FOUND: 404,
  // Two-phase routing: the cap on open plans is reached (bounded memory); the proxy should report or cancel plans.
  KVGATE_ERR_PLAN_LIMIT: 503,
  KVGATE_ERR_SESSION_CONFLICT: 409,
  KVGATE_ERR_SESSION_LIMIT: 503,
  KVGATE_ERR_CANCELLED: 499,
  // kvgate itself could not load or run a model's tokenizer or chat template; the request may still be
  // servable (the engine tokenizes on its own), so callers may fall back to approximate routing.
  KVGATE_ERR_TOKENIZER: 503,
  // The request names a model this server does not serve (vLLM answers 404 too).
  KVGATE_ERR_UNKNOWN_MODEL: 404,
  // A LoRA adapter no worker serves or can load (vLLM answers an unknown adapter name as an unknown model).
  KVGATE_ERR_UNKNOWN_ADAPTER: 404,
  // An operation that needs an idle engine (e.g. reset_prefix_cache) while requests are running.
  KVGATE_ERR_ENGINE_BUSY: 409,
  // Gateway: the request body exceeds the configured limit.
  KVGATE_ERR_BODY_TOO_LARGE: 413,
  // Gateway admin API: missing or wrong bearer token, or the admin API is disabled (no token configured).
  KVGATE_ERR_UNAUTHORIZED: 401,
  KVGATE_ERR_FORBIDDEN: 403,
  // Gateway: no such route.
  KVGATE_ERR_NOT_FOUND: 404,
  // Gateway: every attempt at a worker failed (connection refused or reset, 5xx, broken stream).
  KVGATE_ERR_UPSTREAM: 502,
  // Gateway: a worker did not answer (or went silent mid-body) within the configured timeout.
  KVGATE_ERR_UPSTREAM_TIMEOUT: 504,
  KVGATE_ERR_SYNC_MESSAGE: 400,
  KVGATE_ERR_SNAPSHOT: 422,
};

export class KvgateError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly detail?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, detail?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "KvgateError";
    this.code = code;
    this.status = STATUS[code];
    this.detail = detail;
  }

  /** OpenAI-style error body. */
  toJSON(): { error: { message: string; type: string; code: string } } {
    const type = this.status >= 500 ? "server_error" : this.status === 404 ? "not_found_error" : "invalid_request_error";
    return { error: { message: this.message, type, code: this.code } };
  }
}

/** Raised when the WASM instance trapped; the index was rebuilt empty and `generation` counts rebuilds. */
export class WasmTrapError extends KvgateError {
  readonly generation: number;
  constructor(message: string, generation: number, cause: unknown) {
    super("KVGATE_ERR_WASM_TRAP", message, { generation }, { cause });
    this.name = "WasmTrapError";
    this.generation = generation;
  }
}

export function isKvgateError(e: unknown): e is KvgateError {
  return e instanceof KvgateError;
}
