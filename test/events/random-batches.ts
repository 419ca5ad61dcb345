/**
 * @module Random engine KV-event batches in every encoding the decoders accept (batch as array or map, events as
 * positional arrays or tagged maps, keys in any order, uint64/int64/short/bin hashes, flat or EAGLE token ids, LoRA,
 * media, groups, extra keys, unknown tags and fields), plus byte-level corruptions of them, for differential tests.
 */
import type { Random } from "../../src/core/seeded-random.ts";
import { pack } from "./helpers.ts";

const TAGS = ["BlockStored", "BlockStored", "BlockStored", "BlockRemoved", "BlockRemoved", "AllBlocksCleared", "CacheStoreCommitted"];

function pick<T>(r: Random, xs: readonly T[]): T {
  return xs[r.int(xs.length)]!;
}

/** Small hash pools so Removed and parent hashes often name blocks a Stored event put. */
export function hashPool(r: Random, n: number): bigint[] {
  return Array.from({ length: n }, (_, i) => (i < 4 ? BigInt(i * 70_000 + 3) : r.u64()));
}

/** One hash in one of the encodings engines use for the same 64-bit value. */
function wireHash(r: Random, h: bigint): unknown {
  switch (r.int(12)) {
    case 0: return BigInt.asIntN(64, h); // SGLang: signed int64 (d3 when negative)
    case 1: { // 32-byte digest, vLLM with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0: last 8 bytes
      const b = new Uint8Array(r.int(3) === 0 ? 8 : 32);
      for (let i = 0; i < b.length - 8; i++) b[i] = r.int(256);
      new DataView(b.buffer).setBigUint64(b.length - 8, h);
      return b;
    }
    case 2: { const s = BigInt.asIntN(64, h); return s >= -(2n ** 31n) && s < 2n ** 32n ? Number(s) : h; }
    default: return h <= 0xffffffffn ? Number(h) : h;
  }
}

/** Token ids in every width (fixint, u8, u16, u32) with a real vocabulary's mix, now and then as a 64-bit integer. */
function token(r: Random): number | bigint {
  const k = r.int(10);
  const t = k === 0 ? r.int(128) : k === 1 ? 128 + r.int(128) : k < 8 ? 256 + r.int(65_280) : 65_536 + r.int(100_000);
  return r.int(200) === 0 ? BigInt(t) : t;
}

export interface GenOptions {
  blockSize: number;
  pool: bigint[];
}

function stored(r: Random, o: GenOptions): Record<string, unknown> {
  const n = r.int(8) === 0 ? 0 : 1 + r.int(r.int(4) === 0 ? 40 : 4);
  const bs = r.int(12) === 0 ? o.blockSize * 2 : o.blockSize;
  const hashes = Array.from({ length: n }, () => (r.int(3) === 0 ? pick(r, o.pool) : r.u64()));
  let tokens: unknown[] = Array.from({ length: n * bs + (r.int(15) === 0 ? 1 : 0) }, () => token(r));
  if (r.int(15) === 0 && tokens.length > 0) tokens = tokens.map((t, i) => [t, tokens[i + 1] ?? token(r)]); // EAGLE bigrams
  const e: Record<string, unknown> = {
    block_hashes: hashes.map((h) => wireHash(r, h)),
    parent_block_hash: r.int(3) === 0 ? null : wireHash(r, pick(r, o.pool)),
    token_ids: tokens,
    block_size: r.int(10) === 0 ? null : bs,
    lora_id: r.int(12) === 0 ? 3 : null,
    medium: pick(r, [null, "GPU", "GPU", "GPU", "CPU", "cuda", "DISK"]),
    lora_name: r.int(10) === 0 ? pick(r, ["Alice", ""]) : null,
  };
  if (r.int(2) === 0) e.extra_keys = r.int(6) === 0 ? hashes.map(() => pick(r, [["Alice"], ["img", 0], ["é"], []])) : hashes.map(() => null);
  if (r.int(2) === 0) e.group_idx = pick(r, [0, 0, 1, -1]);
  if (r.int(3) === 0) e.kv_cache_spec_kind = pick(r, ["full_attention", "full_attention", "sliding_window", "mamba", null]);
  return e;
}

function removed(r: Random, o: GenOptions): Record<string, unknown> {
  const n = r.int(6) === 0 ? r.int(12) : 1;
  const e: Record<string, unknown> = { block_hashes: Array.from({ length: n }, () => wireHash(r, pick(r, o.pool))) };
  if (r.int(8) !== 0) e.medium = pick(r, ["GPU", "GPU", "GPU", null, "CPU"]);
  if (r.int(3) === 0) e.group_idx = pick(r, [0, 0, 1]);
  return e;
}

const STORED_ORDER = ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind"];
const REMOVED_ORDER = ["block_hashes", "medium", "group_idx"];

function event(r: Random, o: GenOptions): unknown {
  const tag = pick(r, TAGS);
  const fields = tag === "BlockStored" ? stored(r, o) : tag === "BlockRemoved" ? removed(r, o) : r.int(2) === 0 ? {} : { future: [1, { a: 2 }] };
  if (r.int(2) === 0) {
    // Legacy positional form: fields in their order up to the last one present, nil in gaps, maybe trailing extras.
    const order = tag === "BlockStored" ? STORED_ORDER : tag === "BlockRemoved" ? REMOVED_ORDER : [];
    let last = 0;
    order.forEach((k, i) => { if (k in fields) last = i + 1; });
    const extras = r.int(10) === 0;
    const arr: unknown[] = [tag, ...order.slice(0, extras ? order.length : last).map((k) => fields[k] ?? null)];
    if (extras) arr.push("later-field", 7);
    return arr;
  }
  // Tagged map: msgspec's order (type first) or shuffled, sometimes with unknown keys.
  const entries: [string, unknown][] = [["type", tag], ...Object.entries(fields)];
  if (r.int(8) === 0) entries.push(["cache_salt", "s"], ["session_id", 42]);
  if (r.int(4) === 0) for (let i = entries.length - 1; i > 0; i--) { const j = r.int(i + 1); [entries[i], entries[j]] = [entries[j]!, entries[i]!]; }
  return Object.fromEntries(entries);
}

/** One random batch payload. */
export function randomBatch(r: Random, o: GenOptions): Uint8Array {
  const events = Array.from({ length: r.int(12) === 0 ? 0 : 1 + r.int(r.int(3) === 0 ? 60 : 8) }, () => event(r, o));
  const ts = 1_700_000_000 + r.int(1_000_000) / 7;
  const rank = pick(r, [0, 0, 0, 1, 3, null]);
  switch (r.int(6)) {
    case 0: return pack([ts, events]);
    case 1: return pack({ ts, events, [pick(r, ["data_parallel_rank", "attn_dp_rank", "dp_rank"])]: rank });
    case 2: return pack({ events, extra: [1, 2], ts });
    default: return pack([ts, events, rank]);
  }
}

/** A corrupted copy of `valid`: bit flips, byte changes, insertions, deletions, truncation or trailing bytes. */
export function corrupt(r: Random, valid: Uint8Array): Uint8Array {
  switch (r.int(4)) {
    case 0: return valid.slice(0, r.int(valid.length));
    case 1: {
      const out = new Uint8Array(valid.length + 1 + r.int(8));
      out.set(valid);
      for (let i = valid.length; i < out.length; i++) out[i] = r.int(256);
      return out;
    }
    default:
      return mutateBytes(r, valid);
  }
}

/** One to four byte edits (flip a bit, overwrite, insert, delete) at random places. */
export function mutateBytes(r: Random, valid: Uint8Array): Uint8Array {
  const p = Array.from(valid);
  for (let m = 1 + r.int(4); m > 0 && p.length > 0; m--) {
    const at = r.int(p.length);
    switch (r.int(4)) {
      case 0: p[at] = p[at]! ^ (1 << r.int(8)); break;
      case 1: p[at] = r.int(256); break;
      case 2: p.splice(at, 0, r.int(256)); break;
      default: p.splice(at, 1);
    }
  }
  return Uint8Array.from(p);
}
