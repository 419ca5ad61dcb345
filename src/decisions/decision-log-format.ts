/**
 * @module The decision log's record: one JSON object per line holding what a booked decision read (prompt hashes,
 * salts, every candidate's load and overlap, the scoring config and the random draws) and what it chose — enough for
 * `kvgate explain` to run it again through the WASM core. Formatting and strict parsing; no I/O.
 */
import { KvgateError } from "../core/errors.ts";
import type { DecisionRecord, RoutingPolicy, RouteSignals } from "../routing/index.ts";
import { ROUTING_POLICIES } from "../routing/index.ts";

export const DECISION_LOG_VERSION = 1;

/** Candidate columns, in order, of a logged decision's `candidates` rows. */
export const LOG_COLUMNS = ["worker", "dp_rank", "overlap_blocks", "prefill_tokens", "decode_blocks", "active_overlap_blocks", "tree", "cost"] as const;
export type LoggedCandidate = [string, number, number, number, number, number, number, number];

/** One line of the log, parsed. */
export interface LoggedDecision {
  v: number;
  at: number;
  request_id: string;
  model: string;
  via: RouteSignals["via"];
  policy: RoutingPolicy;
  overlap_weight: number;
  temperature: number;
  block_size: number;
  lora?: string;
  namespace?: string;
  eagle?: boolean;
  /** Prompt tokens (the kernel's isl). */
  isl: number;
  prompt_blocks: number;
  /** Chained sequence hashes, 16 hex digits per complete block, concatenated. */
  hashes: string;
  tokens?: number[];
  draws: number[];
  tie?: "rendezvous" | "tree";
  candidates: LoggedCandidate[];
  /** Outcome: row of the chosen candidate (-1 when nothing was scored), and what it was. */
  chosen: number;
  worker: string;
  dp_rank: number;
  cost: number;
  overlap_blocks: number;
  best_overlap_blocks: number;
}

const HEX = new TextEncoder().encode("0123456789abcdef");
const ascii = new TextDecoder();

/** (lo, hi) words as 16 hex digits each (hi first), one string: a table walk, ~40× faster than toString(16). */
export function wordsToHex(words: Uint32Array, blocks: number): string {
  const out = new Uint8Array(16 * blocks);
  for (let b = 0; b < blocks; b++) {
    const hi = words[2 * b + 1]!, lo = words[2 * b]!;
    const o = 16 * b;
    for (let j = 0; j < 8; j++) {
      out[o + j] = HEX[(hi >>> (28 - 4 * j)) & 15]!;
      out[o + 8 + j] = HEX[(lo >>> (28 - 4 * j)) & 15]!;
    }
  }
  return ascii.decode(out);
}

/** The inverse of wordsToHex. */
export function hexToWords(hex: string): Uint32Array {
  if (hex.length % 16 !== 0 || !/^[0-9a-f]*$/.test(hex)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "hashes must be 16 lower-case hex digits per block");
  const n = hex.length / 16;
  const w = new Uint32Array(2 * n);
  for (let b = 0; b < n; b++) {
    w[2 * b + 1] = parseInt(hex.slice(16 * b, 16 * b + 8), 16) >>> 0;
    w[2 * b] = parseInt(hex.slice(16 * b + 8, 16 * b + 16), 16) >>> 0;
  }
  return w;
}

/** The log line for a record the router filled with inputs (no trailing newline). */
export function formatDecisionLine(r: DecisionRecord): string {
  const inp = r.inputs;
  if (!inp) throw new KvgateError("KVGATE_ERR_STATE", "a decision-log record needs the router's inputs (sink detail \"inputs\")");
  const s = r.signals;
  const line: LoggedDecision = {
    v: DECISION_LOG_VERSION, at: r.at, request_id: s.requestId, model: r.model, via: s.via, policy: inp.policy,
    overlap_weight: inp.overlapWeight, temperature: inp.temperature, block_size: inp.blockSize,
    isl: s.requestTokens, prompt_blocks: s.promptBlocks, hashes: wordsToHex(inp.sequenceWords, s.promptBlocks), draws: inp.draws,
    candidates: r.candidates.map((c, i) => [c.worker, c.dpRank, c.overlapBlocks, c.prefillTokens, c.decodeBlocks, c.activeOverlapBlocks, inp.tree[i] ?? 0, c.cost]),
    chosen: r.chosen ?? -1, worker: s.worker, dp_rank: s.dpRank, cost: s.cost, overlap_blocks: s.overlapBlocks, best_overlap_blocks: s.bestOverlapBlocks,
  };
  if (inp.lora !== undefined) line.lora = inp.lora;
  if (inp.namespace !== undefined) line.namespace = inp.namespace;
  if (inp.eagle) line.eagle = true;
  if (inp.tie) line.tie = inp.tie;
  if (inp.tokens) line.tokens = Array.from(inp.tokens);
  return JSON.stringify(line);
}

function bad(where: string, what: string): never {
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${where}: ${what}`);
}

/** Parses and checks one line; `where` names it in errors (file:line). */
export function parseDecisionLine(text: string, where: string): LoggedDecision {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(text) as Record<string, unknown>;
  } catch (e) {
    bad(where, `not JSON (${(e as Error).message})`);
  }
  if (o === null || typeof o !== "object" || Array.isArray(o)) bad(where, "not a JSON object");
  if (o.v !== DECISION_LOG_VERSION) bad(where, `unknown decision-log version ${String(o.v)} (this kvgate reads ${DECISION_LOG_VERSION})`);
  const num = (k: string): void => {
    if (typeof o[k] !== "number" || !Number.isFinite(o[k])) bad(where, `${k} must be a number`);
  };
  const str = (k: string): void => {
    if (typeof o[k] !== "string") bad(where, `${k} must be a string`);
  };
  for (const k of ["at", "overlap_weight", "temperature", "block_size", "isl", "prompt_blocks", "chosen", "dp_rank", "cost", "overlap_blocks", "best_overlap_blocks"]) num(k);
  for (const k of ["request_id", "model", "via", "hashes", "worker"]) str(k);
  if (!ROUTING_POLICIES.includes(o.policy as RoutingPolicy)) bad(where, `unknown policy ${String(o.policy)}`);
  if (!Array.isArray(o.draws) || o.draws.some((d) => typeof d !== "number")) bad(where, "draws must be an array of numbers");
  if (!Array.isArray(o.candidates)) bad(where, "candidates must be an array");
  for (const c of o.candidates as unknown[]) {
    if (!Array.isArray(c) || c.length !== LOG_COLUMNS.length || typeof c[0] !== "string" || c.slice(1).some((x) => typeof x !== "number")) {
      bad(where, `each candidate must be [${LOG_COLUMNS.join(", ")}]`);
    }
  }
  if (o.tokens !== undefined && (!Array.isArray(o.tokens) || o.tokens.some((t) => !Number.isInteger(t) || (t as number) < 0))) bad(where, "tokens must be an array of token ids");
  if ((o.hashes as string).length !== 16 * (o.prompt_blocks as number)) bad(where, `hashes must hold 16 hex digits for each of the ${String(o.prompt_blocks)} prompt blocks`);
  return o as unknown as LoggedDecision;
}
