/** @module Options of a KvIndex, their defaults, validation, and the memory budget they imply. */
import { KvgateError } from "./errors.ts";

export interface KvIndexOptions {
  /** Worker slots, one per (worker, dp rank). Default 64; each further 64 widens every index node by 8 bytes. */
  maxSlots?: number;
  /** (slot, block) entries the index holds at most. Default 2^20. */
  capacity?: number;
  /** Prompt tokens the scratch region holds before it grows. Default 65,536. */
  promptTokens?: number;
  /** Longest prompt accepted, in tokens. Default 2^21. */
  maxPromptTokens?: number;
  /** Blocks one Stored/Removed call can carry before it is split. Default 8,192. */
  eventBlocks?: number;
  /** Bytes of one binary event batch. Default 1 MiB. */
  eventBytes?: number;
  /** Multimodal hashes per prompt. Default 4,096. */
  maxMultimodal?: number;
  /** Approximate mode: block TTL in ms (sliding). Default 120,000. */
  approxTtlMs?: number;
  /** Approximate mode: blocks held before pruning. Default 2^20. */
  approxMaxBlocks?: number;
  /** Approximate mode: pruning keeps this share of approxMaxBlocks. Default 0.8. */
  pruneTargetRatio?: number;
  /**
   * find_matches probes every matchJump-th block while no worker drops out, and walks back one block at a time only
   * where one does (Dynamo's Flash Indexer does the same). Exact while each worker's blocks are prefix-closed, as
   * engines' LRU eviction keeps them; 1 probes every block. Default 16, at most 1,024.
   */
  matchJump?: number;
  /**
   * Recent prompts kept with their block hashes, so one that repeats or extends a remembered prompt (a conversation's
   * next turn, a shared system prompt) compares tokens instead of hashing them. 0 turns the memo off. Default 128.
   */
  promptMemoEntries?: number;
  /** Bytes of the memo's ring (tokens plus 16 bytes of hashes per block). Default 8 MiB. */
  promptMemoBytes?: number;
  /** Salt of the table hash (randomised per process by default so crafted prompts cannot collide on purpose). */
  salt?: bigint;
}

export type ResolvedKvIndexOptions = Required<KvIndexOptions>;

/** Prompts the core's prompt memo holds by default (KvIndexOptions.promptMemoEntries). */
export const DEFAULT_PROMPT_MEMO_ENTRIES = 128;

/** Blocks a prefix match may skip (KvIndexOptions.matchJump), also the gateway's --index-match-jump default. */
export const DEFAULT_MATCH_JUMP = 16;

const DEFAULTS: Omit<ResolvedKvIndexOptions, "salt"> = {
  maxSlots: 64,
  capacity: 1 << 20,
  promptTokens: 65_536,
  maxPromptTokens: 1 << 21,
  eventBlocks: 8_192,
  eventBytes: 1 << 20,
  maxMultimodal: 4_096,
  approxTtlMs: 120_000,
  approxMaxBlocks: 1 << 20,
  pruneTargetRatio: 0.8,
  matchJump: DEFAULT_MATCH_JUMP,
  promptMemoEntries: DEFAULT_PROMPT_MEMO_ENTRIES,
  promptMemoBytes: 8 << 20,
};

function positiveInt(name: string, v: number, max: number): void {
  if (!Number.isInteger(v) || v <= 0 || v > max) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${name} must be an integer in 1..${max}, got ${v}`);
  }
}

function randomSalt(): bigint {
  const w = new Uint32Array(2);
  crypto.getRandomValues(w);
  return (BigInt(w[1]!) << 32n) | BigInt(w[0]!);
}

export function resolveOptions(o: KvIndexOptions = {}): ResolvedKvIndexOptions {
  const r = { ...DEFAULTS, ...o, salt: o.salt ?? randomSalt() } as ResolvedKvIndexOptions;
  positiveInt("maxSlots", r.maxSlots, 4096);
  positiveInt("capacity", r.capacity, 1 << 26);
  positiveInt("promptTokens", r.promptTokens, 1 << 26);
  positiveInt("maxPromptTokens", r.maxPromptTokens, 1 << 26);
  positiveInt("eventBlocks", r.eventBlocks, 1 << 22);
  positiveInt("eventBytes", r.eventBytes, 1 << 28);
  positiveInt("approxMaxBlocks", r.approxMaxBlocks, 1 << 30);
  positiveInt("matchJump", r.matchJump, 1024);
  if (!Number.isInteger(r.maxMultimodal) || r.maxMultimodal < 0) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `maxMultimodal must be a non-negative integer`);
  }
  if (!Number.isInteger(r.promptMemoEntries) || r.promptMemoEntries < 0 || r.promptMemoEntries > 4096 ||
      !Number.isInteger(r.promptMemoBytes) || r.promptMemoBytes < 0 || r.promptMemoBytes > 1 << 30 ||
      (r.promptMemoEntries === 0) !== (r.promptMemoBytes === 0)) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `promptMemoEntries (0..4096) and promptMemoBytes (0..2^30) must both be 0 or both positive`);
  }
  if (!(r.approxTtlMs > 0)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `approxTtlMs must be > 0`);
  if (!(r.pruneTargetRatio > 0 && r.pruneTargetRatio <= 1)) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `pruneTargetRatio must be in (0, 1]`);
  }
  if (r.eventBytes < 16) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `eventBytes must be at least 16`);
  r.promptTokens = Math.min(r.promptTokens, r.maxPromptTokens);
  return r;
}

function pow2AtLeast(n: number): number {
  let p = 16;
  while (p < n) p *= 2;
  return p;
}

/**
 * Bytes the core reserves at creation, plus the worst case of prompt-region growth (regions double, and abandoned
 * ones are not reused, so growth costs at most twice the largest size). Mirrors `init` in assembly/index.ts.
 */
export function budgetBytes(r: ResolvedKvIndexOptions): number {
  const words = Math.ceil(r.maxSlots / 64);
  const table = pow2AtLeast(Math.floor((r.capacity * 4 + 2) / 3));
  const heap = Math.min(r.capacity, r.approxMaxBlocks + 1) + 64;
  const fixed = table * (8 + 8 * words) + table * 32 + heap * 80 + r.maxSlots * 52 + words * 8 +
    r.eventBytes + r.eventBlocks * 24 + 9 * r.maxSlots * 8 + r.maxMultimodal * 24 + 8193 * 4 + 4096;
  const dup = pow2AtLeast(Math.max(r.eventBytes >> 4, r.eventBlocks) * 2) * 16;
  const prompt = (t: number): number => t * 4 + t * 20;
  // Prompt memo (assembly/hash/prompt-memo.ts): entry records, the ring, a directory and a doorkeeper of `slots`.
  const memo = r.promptMemoEntries > 0 ? r.promptMemoEntries * 64 + r.promptMemoBytes + pow2AtLeast(Math.max(1024, 16 * r.promptMemoEntries)) * 12 + 128 : 0;
  return fixed + dup + memo + 2 * prompt(r.maxPromptTokens) + prompt(r.promptTokens) + ingestBytes(r).total + (1 << 20);
}

/**
 * The in-core engine batch decoder's regions (reserved on first use, see kv-index-engine-batch.ts): msgpack payloads
 * up to `input` bytes are decoded in the core into at most `output` bytes of records; larger ones take the host path.
 */
export function ingestBytes(r: ResolvedKvIndexOptions): { input: number; output: number; total: number } {
  // Bounded on both sides: small eventBytes still decode typical engine steps in the core, and a huge eventBytes
  // does not triple memory for batches that big (rare; the host decoder takes them).
  const input = Math.min(Math.max(r.eventBytes, 1 << 16), 1 << 22);
  const output = 2 * input;
  return { input, output, total: input + output + 256 };
}
