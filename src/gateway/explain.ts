/**
 * @module The `x-kvgate-explain: 1` request header: who may ask (the admin token's holder, when one is set), and the
 * candidates table the answer carries — in the `x-kvgate-explain` response header (compact JSON; gzip + base64url
 * when it would be large) or, for /v1/route, in the body. Format in docs/observability.md.
 */
import { fromBase64, toBase64 } from "../core/base64.ts";
import { KvgateError } from "../core/errors.ts";
import type { DecisionRecord } from "../routing/index.ts";

export const EXPLAIN_HEADER = "x-kvgate-explain";
/** A JSON table up to this size goes into the header as it is; a larger one is compressed (headers are capped at 8–16 KB). */
export const EXPLAIN_PLAIN_MAX = 4096;
export const EXPLAIN_COLUMNS = ["worker", "dp_rank", "overlap_blocks", "prefill_tokens", "decode_blocks", "active_overlap_blocks", "cost"] as const;

/**
 * Whether the request asks to explain its decision. With an admin token configured only its bearer may: anyone else
 * gets 403 (the table shows every worker's load, which the admin API guards too).
 */
export function wantsExplain(headers: Headers, adminToken: string): boolean {
  const v = headers.get(EXPLAIN_HEADER);
  if (v === null || v === "" || v === "0") return false;
  if (v !== "1" && v !== "true") throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${EXPLAIN_HEADER} must be 1 (or 0), got ${JSON.stringify(v.slice(0, 40))}`);
  if (adminToken === "") return true;
  const auth = headers.get("authorization") ?? "";
  const m = /^Bearer\s+(.+)$/i.exec(auth.trim());
  if (!m || !sameSecret(m[1]!, adminToken)) {
    throw new KvgateError("KVGATE_ERR_FORBIDDEN", `${EXPLAIN_HEADER} needs the admin token (Authorization: Bearer …)`);
  }
  return true;
}

/** Compares without an early exit, so the time taken says nothing about how much of the token was right. */
function sameSecret(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a), y = new TextEncoder().encode(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < y.length; i++) diff |= (x[i] ?? 0) ^ y[i]!;
  return diff === 0;
}

export interface ExplainTable {
  request_id: string;
  via: DecisionRecord["signals"]["via"];
  worker: string;
  dp_rank: number;
  /** Row of the chosen worker in `rows`; -1 when nothing was scored (explicit target, session). */
  chosen: number;
  best_overlap_blocks: number;
  prompt_blocks: number;
  columns: typeof EXPLAIN_COLUMNS;
  rows: [string, number, number, number, number, number, number][];
}

export function explainTable(r: DecisionRecord): ExplainTable {
  const s = r.signals;
  return {
    request_id: s.requestId, via: s.via, worker: s.worker, dp_rank: s.dpRank, chosen: r.chosen ?? -1,
    best_overlap_blocks: s.bestOverlapBlocks, prompt_blocks: s.promptBlocks, columns: EXPLAIN_COLUMNS,
    rows: r.candidates.map((c) => [c.worker, c.dpRank, c.overlapBlocks, c.prefillTokens, c.decodeBlocks, c.activeOverlapBlocks, c.cost]),
  };
}

/** The header value: the table as compact JSON when it is short and ASCII, else base64url of its gzip (no `{` first). */
export function explainHeaderValue(r: DecisionRecord): Promise<string> {
  return encodeExplain(explainTable(r));
}

/** explainHeaderValue for a table already built (the Workers pool path gets it from the pool object's answer). */
export async function encodeExplain(table: ExplainTable): Promise<string> {
  const json = JSON.stringify(table);
  // eslint-disable-next-line no-control-regex
  if (json.length <= EXPLAIN_PLAIN_MAX && /^[\x20-\x7e]*$/.test(json)) return json;
  const gz = await new Response(new Blob([json]).stream().pipeThrough(new CompressionStream("gzip"))).arrayBuffer();
  return toBase64(new Uint8Array(gz), true);
}

/** Reads a header value back into the table (for clients and tests). */
export async function parseExplainHeader(value: string): Promise<ExplainTable> {
  if (value.startsWith("{")) return JSON.parse(value) as ExplainTable;
  const bytes = fromBase64(value, true);
  const text = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
  return JSON.parse(text) as ExplainTable;
}

/** The explain header for a response, when the decision was explained. */
export async function explainHeaders(decision: DecisionRecord | ExplainTable | undefined): Promise<Record<string, string>> {
  if (decision && "rows" in decision) return { [EXPLAIN_HEADER]: await encodeExplain(decision) };
  return decision ? { [EXPLAIN_HEADER]: await explainHeaderValue(decision) } : {};
}
