/**
 * @module Decodes vLLM KVEventBatch payloads in every shape engines have sent (engine-interop.md §2.2, §6.4): batch
 * as `[ts, events]`, `[ts, events, dp_rank]` or a map; events as positional arrays (tag first) or tagged maps;
 * hashes as uint64, negative int64 (folded to uint64) or 32-byte bin (low 64 bits, vLLM's rule); unknown tags and
 * fields skipped. The sim's tests use it to replay what the sim published; consumers may use it as well.
 */
import { decode } from "@msgpack/msgpack";
import { KvgateError } from "../core/errors.ts";
import { MEDIUM_GPU, type KvCacheEvent, type KvEventBatch } from "./kv-events.ts";

export interface DecodedKvEventBatch extends KvEventBatch {
  /** Events with a tag this decoder does not know (newer vLLM kinds), left out of `events`. */
  skipped: number;
}

function corrupt(msg: string): KvgateError {
  return new KvgateError("KVGATE_ERR_CORRUPT_EVENT", `KV event batch: ${msg}`);
}

function toHash(v: unknown): bigint {
  if (typeof v === "bigint") return BigInt.asUintN(64, v);
  if (typeof v === "number" && Number.isInteger(v)) return BigInt.asUintN(64, BigInt(v));
  if (v instanceof Uint8Array && v.length >= 8) {
    return new DataView(v.buffer, v.byteOffset + v.length - 8, 8).getBigUint64(0, false);
  }
  throw corrupt(`bad block hash ${String(v)}`);
}

function toHashes(v: unknown): bigint[] {
  if (!Array.isArray(v)) throw corrupt("block_hashes is not a list");
  return v.map(toHash);
}

/** Flat token ids; EAGLE bigram pairs [(t0,t1),(t1,t2)…] become t0, t1, …, plus the last pair's second element. */
function toTokens(v: unknown): number[] {
  if (!Array.isArray(v)) throw corrupt("token_ids is not a list");
  if (v.length > 0 && Array.isArray(v[0])) {
    const out = v.map((p) => Number((p as unknown[])[0]));
    out.push(Number((v[v.length - 1] as unknown[])[1]));
    return out;
  }
  return v.map((t) => Number(t));
}

function optString(v: unknown): string | null {
  return typeof v === "string" ? v : null;
}

function event(raw: unknown): KvCacheEvent | undefined {
  let tag: unknown, f: Record<string, unknown>;
  if (Array.isArray(raw)) {
    tag = raw[0];
    const [, a, b, c, d, e, g, h] = raw;
    f = tag === "BlockStored"
      ? { block_hashes: a, parent_block_hash: b, token_ids: c, block_size: d, lora_id: e, medium: g, lora_name: h }
      : tag === "BlockRemoved" ? { block_hashes: a, medium: b } : {};
  } else if (raw !== null && typeof raw === "object") {
    f = raw as Record<string, unknown>;
    tag = f.type;
  } else {
    throw corrupt("an event is neither an array nor a map");
  }
  switch (tag) {
    case "BlockStored": {
      const hashes = toHashes(f.block_hashes);
      const parent = f.parent_block_hash == null ? null : toHash(f.parent_block_hash);
      return {
        type: "BlockStored", block_hashes: hashes, parent_block_hash: parent, token_ids: toTokens(f.token_ids),
        block_size: Number(f.block_size), lora_id: f.lora_id == null ? null : Number(f.lora_id),
        medium: optString(f.medium) ?? MEDIUM_GPU, lora_name: optString(f.lora_name),
      };
    }
    case "BlockRemoved":
      return { type: "BlockRemoved", block_hashes: toHashes(f.block_hashes), medium: optString(f.medium) ?? MEDIUM_GPU };
    case "AllBlocksCleared":
      return { type: "AllBlocksCleared" };
    default:
      return undefined;
  }
}

export function decodeKvEventBatch(bytes: Uint8Array): DecodedKvEventBatch {
  let raw: unknown;
  try {
    raw = decode(bytes, { useBigInt64: true });
  } catch (e) {
    throw corrupt(`not msgpack (${(e as Error).message})`);
  }
  let ts: unknown, events: unknown, rank: unknown;
  if (Array.isArray(raw)) [ts, events, rank] = raw;
  else if (raw !== null && typeof raw === "object") ({ ts, events, data_parallel_rank: rank } = raw as Record<string, unknown>);
  else throw corrupt("not an array or map");
  if (typeof ts !== "number" || !Array.isArray(events)) throw corrupt("missing ts or events");
  const out: KvCacheEvent[] = [];
  let skipped = 0;
  for (const e of events) {
    const d = event(e);
    if (d) out.push(d);
    else skipped++;
  }
  return { ts, events: out, data_parallel_rank: rank == null ? null : Number(rank), skipped };
}
