/**
 * @module Token ids for trace prompts, which publish lengths and block ids but no text: a segment's tokens are a
 * fixed pseudo-random function of (segment id, position), so equal ids give equal tokens (shared prefixes stay
 * shared, and hit the same KV blocks) and different ids give different tokens. Sent as token-id prompts, they reach
 * the engines unchanged, so the router hashes exactly what the engines cache.
 */
import type { ReplayRequest, Segment } from "./replay-request.ts";

/** Ids stay inside a Llama-3-sized vocabulary, as a real tokenizer's would. */
export const SYNTHETIC_VOCAB = 128_000;

/** murmur3's 32-bit finaliser: a bijection on u32, so distinct inputs never collide before the vocabulary fold. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Per-segment seed; injective over ids below 2^32 (all trace hash ids), and over unique ids among themselves. */
export function segmentSeed(id: number): number {
  const lo = id >>> 0;
  const hi = Math.floor(id / 4294967296) >>> 0;
  return fmix32((lo ^ (hi === 0 ? 0 : fmix32(hi))) >>> 0);
}

/** Token `j` of segment `id`. */
export function segmentToken(id: number, j: number): number {
  return fmix32((segmentSeed(id) + Math.imul(j, 0x9e3779b9)) >>> 0) % SYNTHETIC_VOCAB;
}

/** Writes a segment's first `seg.length` tokens at `out[offset]`; returns the offset after them. */
export function writeSegment(out: Uint32Array, offset: number, seg: Segment): number {
  const seed = segmentSeed(seg.id);
  for (let j = 0; j < seg.length; j++) out[offset + j] = fmix32((seed + Math.imul(j, 0x9e3779b9)) >>> 0) % SYNTHETIC_VOCAB;
  return offset + seg.length;
}

/** The request's whole prompt. */
export function promptTokens(req: ReplayRequest): Uint32Array {
  const out = new Uint32Array(req.inputLength);
  let at = 0;
  for (const s of req.segments) at = writeSegment(out, at, s);
  return out;
}
