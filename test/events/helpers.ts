/** @module Fixtures for the KV-event ingestion tests: the captured vLLM event, wire encoders for every variant, waits. */
import { readFileSync } from "node:fs";
import { encode } from "@msgpack/msgpack";
import { encodeKvEventBatch, type KvEventEncoding } from "../../src/sim/kv-event-codec.ts";
import { blockRemoved, blockStored, ALL_BLOCKS_CLEARED, type BlockStoredEvent, type KvCacheEvent } from "../../src/sim/kv-events.ts";
import { encodeSeq } from "../../src/events/zmq-frames.ts";

const dataDir = new URL("../fixtures/kv-events/", import.meta.url);

export interface Capture {
  tokens: number[];
  hashes: bigint[];
  blockSize: number;
  medium: string;
}

/** The BlockStored event captured from a real vLLM (Qwen3-0.6B, 400 tokens, 25 blocks of 16). */
export function loadCapture(): Capture {
  // Parse the uint64 hashes exactly: JSON.parse would round them to doubles.
  const text = readFileSync(new URL("kv_event_base.json", dataDir), "utf8");
  const raw = JSON.parse(text) as { token_ids: number[]; block_size: number; medium: string };
  const list = /"block_hashes"\s*:\s*\[([^\]]*)\]/.exec(text)![1]!;
  const hashes = list.split(",").map((s) => BigInt(s.trim()));
  return { tokens: raw.token_ids, hashes, blockSize: raw.block_size, medium: raw.medium };
}

export interface DerivedVectors {
  /** Full 32-byte digests of the first blocks (what vLLM sends as `bin` with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0). */
  digestsHex: string[];
  /** SGLang's chain for the same tokens: signed int64 hashes. */
  sglangInt64: bigint[];
  framesHex: { legacy_array: string; map: string };
}

export function derivedVectors(): DerivedVectors {
  const text = readFileSync(new URL("derived_vectors.json", dataDir), "utf8");
  const json = JSON.parse(text) as { vllm_sha256_cbor: { digests_hex: string[] }; msgpack_frames_hex: DerivedVectors["framesHex"] };
  // int64 values are parsed from the text: JSON.parse would round them to doubles.
  const sg = /"sglang_sha256_chain"\s*:\s*\{\s*"event_int64"\s*:\s*\[([^\]]*)\]/.exec(text)![1]!;
  return {
    digestsHex: json.vllm_sha256_cbor.digests_hex,
    sglangInt64: sg.split(",").map((v) => BigInt(v.trim())),
    framesHex: json.msgpack_frames_hex,
  };
}

export const hex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, "hex"));

/** A batch encoded as msgspec does (the sim's codec): events as positional arrays or tagged maps. */
export function vllmBatch(events: KvCacheEvent[], form: KvEventEncoding = "array", rank: number | null = 0, ts = 1_700_000_000.25): Uint8Array {
  return encodeKvEventBatch({ ts, events, data_parallel_rank: rank }, form);
}

/** Any msgpack value (BigInts as 64-bit integers), for variants msgspec's shapes do not cover. */
export function pack(value: unknown): Uint8Array {
  return encode(value, { useBigInt64: true });
}

export function captureStored(c: Capture, opts: { blocks?: number; from?: number; lora?: string | null; medium?: string | null } = {}): BlockStoredEvent {
  const from = opts.from ?? 0, n = opts.blocks ?? c.hashes.length - from;
  const e = blockStored(from === 0 ? null : c.hashes[from - 1]!, c.hashes.slice(from, from + n),
    c.tokens.slice(from * c.blockSize, (from + n) * c.blockSize), c.blockSize);
  return { ...e, lora_name: opts.lora ?? null, medium: opts.medium === undefined ? e.medium : opts.medium };
}

export { blockRemoved, ALL_BLOCKS_CLEARED };

/** The live frames vLLM sends: [topic, seq (8 bytes BE), payload]. */
export function liveFrames(seq: number, payload: Uint8Array, topic = ""): Uint8Array[] {
  return [new TextEncoder().encode(topic), encodeSeq(seq), payload];
}

/** Waits (yielding to the event loop) until `cond` holds; the test's own timeout bounds it. */
export async function until(cond: () => boolean, what = "condition"): Promise<void> {
  for (let i = 0; !cond(); i++) {
    if (i > 20_000) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}
