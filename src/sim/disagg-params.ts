/**
 * @module What a request body asks of a disaggregated engine (kv_transfer_params, bootstrap_*; docs/disaggregation.md);
 * malformed fields are a 400, so a router bug shows instead of a silent aggregated answer.
 */
import { KvgateError } from "../core/errors.ts";

/** Where a decode reads the KV a vLLM prefill kept for it (the prefill's answer, copied unchanged by the router). */
export interface RemotePrefillParams {
  remoteEngineId: string;
  remoteRequestId: string;
  remoteBlockIds: number[];
  remoteHost: string;
  remotePort: number;
}

export interface BootstrapInfo {
  host: string;
  port: number;
  /** The room as a decimal string: both legs parse the same JSON literal, so they agree on it even above 2^53. */
  room: string;
}

export type DisaggAsk =
  | { kind: "none" }
  /** vLLM prefill: compute the prompt, keep its KV for a remote decode, answer with kv_transfer_params. */
  | { kind: "remote_decode" }
  /** vLLM decode: read the prompt's KV from the prefill engine first. */
  | { kind: "remote_prefill"; params: RemotePrefillParams }
  /** SGLang: prefill and decode meet in a bootstrap room on the prefill engine. */
  | { kind: "bootstrap"; info: BootstrapInfo };

function bad(message: string, param: string): never {
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message, { param });
}

function port(v: unknown, param: string): number {
  if (typeof v === "string" && /^\d+$/.test(v)) v = Number(v);
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > 65535) bad(`${param} must be a port number`, param);
  return v;
}

function nonEmpty(v: unknown, param: string): string {
  if (typeof v !== "string" || v.length === 0) bad(`${param} must be a non-empty string`, param);
  return v;
}

function readTransferParams(v: unknown): DisaggAsk {
  if (v === undefined || v === null) return { kind: "none" };
  if (typeof v !== "object" || Array.isArray(v)) bad("kv_transfer_params must be an object", "kv_transfer_params");
  const p = v as Record<string, unknown>;
  for (const k of ["do_remote_decode", "do_remote_prefill"]) {
    if (p[k] !== undefined && p[k] !== null && typeof p[k] !== "boolean") bad(`kv_transfer_params.${k} must be a boolean`, "kv_transfer_params");
  }
  if (p.do_remote_decode === true && p.do_remote_prefill === true) bad("kv_transfer_params cannot ask for both remote prefill and remote decode", "kv_transfer_params");
  if (p.do_remote_decode === true) return { kind: "remote_decode" };
  if (p.do_remote_prefill !== true) return { kind: "none" };
  const ids = p.remote_block_ids;
  if (!Array.isArray(ids) || !ids.every((b) => typeof b === "number" && Number.isInteger(b) && b >= 0)) {
    bad("kv_transfer_params.remote_block_ids must be an array of block ids", "kv_transfer_params");
  }
  return {
    kind: "remote_prefill",
    params: {
      remoteEngineId: nonEmpty(p.remote_engine_id, "kv_transfer_params.remote_engine_id"),
      remoteRequestId: nonEmpty(p.remote_request_id, "kv_transfer_params.remote_request_id"),
      remoteBlockIds: ids as number[],
      remoteHost: nonEmpty(p.remote_host, "kv_transfer_params.remote_host"),
      remotePort: port(p.remote_port, "kv_transfer_params.remote_port"),
    },
  };
}

function readBootstrap(body: Record<string, unknown>): DisaggAsk {
  const given = ["bootstrap_host", "bootstrap_port", "bootstrap_room"].filter((k) => body[k] !== undefined && body[k] !== null);
  if (given.length === 0) return { kind: "none" };
  if (given.length < 3) bad("bootstrap_host, bootstrap_port and bootstrap_room go together", given[0]!);
  const room = body.bootstrap_room;
  if (typeof room !== "number" || !Number.isInteger(room) || room < 0) bad("bootstrap_room must be a non-negative integer", "bootstrap_room");
  return {
    kind: "bootstrap",
    info: { host: nonEmpty(body.bootstrap_host, "bootstrap_host"), port: port(body.bootstrap_port, "bootstrap_port"), room: BigInt(room).toString() },
  };
}

/** The disaggregation request of a body; at most one flow per request. */
export function readDisaggAsk(body: Record<string, unknown>): DisaggAsk {
  const vllm = readTransferParams(body.kv_transfer_params);
  const sglang = readBootstrap(body);
  if (vllm.kind !== "none" && sglang.kind !== "none") bad("a request carries either kv_transfer_params or bootstrap fields, not both", "kv_transfer_params");
  return vllm.kind !== "none" ? vllm : sglang;
}

/** `host:port` as a URL authority (IPv6 literals in brackets). */
export function authority(host: string, port: number): string {
  return `${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}:${port}`;
}
