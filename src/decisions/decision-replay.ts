/**
 * @module Runs logged decisions again offline through the WASM core: the same score kernel (KvIndex.scoreColumns) on
 * the logged candidates' loads and overlaps, with the logged config and random draws, then the selector's own tie
 * rules (tie-break.ts) — and, when the log kept the prompt's tokens, re-hashes them and checks the logged hashes.
 * Reports every decision that comes out differently. Cache-blind policies (round_robin, random, least_loaded) chose
 * outside the kernel from state the log does not keep: their costs are checked, their choice is taken as logged.
 */
import { CacheSalts } from "../core/cache-salt.ts";
import { ScoreCol, type KvIndex } from "../core/kv-index.ts";
import { breakTies, rankKeyOf, type TieInputs } from "../routing/index.ts";
import { hexToWords, wordsToHex, type LoggedDecision } from "./decision-log-format.ts";

export interface Mismatch {
  /** file:line of the decision. */
  where: string;
  requestId: string;
  field: "hashes" | "prompt" | "worker" | "cost" | "candidate_cost" | "tie";
  logged: string;
  replayed: string;
}

/** Tolerance for costs: the kernel computes in f64 and JSON keeps every f64 exactly, so any difference is real. */
const SAME = (a: number, b: number): boolean => a === b || Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));

class LoggedTies implements TieInputs {
  kind: "rendezvous" | "tree" | undefined;
  #draw = 1;
  constructor(private readonly d: LoggedDecision) {}
  treeSize(i: number): number {
    return this.d.candidates[i]![6];
  }
  rankKey(i: number): number {
    const c = this.d.candidates[i]!;
    return rankKeyOf(c[0], c[1]);
  }
  firstBlockWords(): Uint32Array {
    return hexToWords(this.d.hashes.slice(0, 16));
  }
  draw(): number {
    // A second draw the log does not hold: NaN makes the kernel's pick differ visibly rather than silently.
    return this.d.draws[this.#draw++] ?? Number.NaN;
  }
  tied(kind: "rendezvous" | "tree"): void {
    this.kind = kind;
  }
}

export class DecisionReplayer {
  readonly #salts: CacheSalts;

  /** `index`: a core instance with at least as many slots as the widest logged decision has candidates. */
  constructor(private readonly index: KvIndex) {
    this.#salts = new CacheSalts((b, seed) => index.xxh3(b, seed));
  }

  /** The ways `d` comes out differently from its log line (empty: it replays exactly). */
  replay(d: LoggedDecision, where: string): Mismatch[] {
    const out: Mismatch[] = [];
    const miss = (field: Mismatch["field"], logged: unknown, replayed: unknown): void => {
      out.push({ where, requestId: d.request_id, field, logged: String(logged), replayed: String(replayed) });
    };
    if (d.tokens) {
      if (d.tokens.length !== d.isl) miss("prompt", `${d.isl} tokens`, `${d.tokens.length} tokens logged`);
      const h = this.index.hash(d.tokens, this.#salts.options(d.block_size, d.lora, d.namespace, d.eagle));
      const words = new Uint32Array(2 * h.seq.length);
      h.seq.forEach((s, i) => {
        words[2 * i] = Number(s & 0xffffffffn);
        words[2 * i + 1] = Number(s >> 32n);
      });
      const hex = wordsToHex(words, h.seq.length);
      if (hex !== d.hashes) miss("hashes", firstDiff(d.hashes, hex, "logged"), firstDiff(d.hashes, hex, "replayed"));
    }
    const n = d.candidates.length;
    if (n === 0) return out;
    if (n > this.index.options.maxSlots) throw new RangeError(`${where}: ${n} candidates exceed the replay core's ${this.index.options.maxSlots} slots`);
    const cols = this.index.scoreColumns();
    const { f64, base, stride, run } = cols;
    const col = (c: number): number => base + c * stride;
    for (let i = 0; i < n; i++) {
      const c = d.candidates[i]!;
      f64[col(ScoreCol.overlap) + i] = c[2];
      f64[col(ScoreCol.prefill) + i] = c[3];
      f64[col(ScoreCol.decode) + i] = c[4];
      f64[col(ScoreCol.activeOverlap) + i] = c[5];
      f64[col(ScoreCol.blockSize) + i] = d.block_size;
      f64[col(ScoreCol.tree) + i] = 0;
    }
    let chosen = run(n, d.isl, d.overlap_weight, d.temperature, d.draws[0] ?? Number.NaN);
    const ties = new LoggedTies(d);
    if (d.policy !== "kv") chosen = d.chosen;
    else if (d.temperature === 0 && n > 1 && chosen >= 0 && chosen < n) chosen = breakTies(cols, n, chosen, d.isl, d.overlap_weight, d.prompt_blocks, ties);
    if (d.policy === "kv" && ties.kind !== d.tie) miss("tie", d.tie ?? "none", ties.kind ?? "none");
    for (let i = 0; i < n; i++) {
      const c = d.candidates[i]!, cost = f64[col(ScoreCol.cost) + i]!;
      if (!SAME(cost, c[7])) miss("candidate_cost", `${c[0]}#${c[1]} ${c[7]}`, `${c[0]}#${c[1]} ${cost}`);
    }
    const pick = d.candidates[chosen];
    if (!pick || chosen !== d.chosen || pick[0] !== d.worker || pick[1] !== d.dp_rank) {
      miss("worker", `${d.worker}#${d.dp_rank}`, pick ? `${pick[0]}#${pick[1]}` : `none (kernel returned ${chosen})`);
    } else if (!SAME(f64[col(ScoreCol.cost) + chosen]!, d.cost)) {
      miss("cost", d.cost, f64[col(ScoreCol.cost) + chosen]);
    }
    return out;
  }
}

/** The block where two hash strings part, as "block k: <hash>". */
function firstDiff(a: string, b: string, side: "logged" | "replayed"): string {
  const blocks = Math.max(a.length, b.length) / 16;
  for (let k = 0; k < blocks; k++) {
    const x = a.slice(16 * k, 16 * k + 16), y = b.slice(16 * k, 16 * k + 16);
    if (x !== y) return `block ${k}: ${(side === "logged" ? x : y) || "(none)"}`;
  }
  return "(same)";
}
