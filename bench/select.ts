/**
 * @module `npm run bench -- select`: acceptance item 3 of issue 3 — selection cost per request (hash + match + score +
 * booking, i.e. one synchronous `Router.route` admission) for 8k-token prompts over 16, 64 and 256 workers, p50/p99,
 * and the share spent outside WASM. The WASM share is `KvIndex.route` (hashing + prefix matching, one crossing),
 * timed inline by the router's own fine timer and, as a cross-check, by calling `index.route` alone on the same
 * prompts. The score kernel is also WASM but runs inside the JS marshalling of `scoreCandidates`, so it is counted
 * outside (the figure is therefore an upper bound on the JS share).
 *
 * Workload: 32 prompt families with a 4,096-token shared prefix and a unique 4,096-token tail; each family's prefix
 * cached on 3 workers (KV Stored events), so requests see partial overlaps; a sliding window of in-flight bookings
 * (4 per worker, half past their first token) so load tracking and block dedupe do real work. Each worker count runs
 * with KV reuse assumed (default: in-flight prompt blocks deduplicated by sequence hash) and without.
 *
 * Decision capture (issue 17): each worker count also runs, with KV reuse assumed, with a DecisionSink wanting the
 * candidates table (the gateway's ring), one wanting the replay inputs (the decision log's record), and one that also
 * formats the log's JSON line (file writing excluded: it is asynchronous), interleaved in rounds with the no-sink
 * baseline; printed as ratios to that baseline.
 *
 * The main table runs --rounds rounds, each over every worker count in turn, and shows each figure's median over
 * rounds; the scaling ratio (p50 at the largest count over p50 at the smallest, issue 19's acceptance 4) is taken
 * within each round and its median printed, so the machine's drift between rows does not enter it.
 *
 * Flags: --workers 16,64,256  --requests N (4000 measured)  --warmup N (3000)  --tokens N (8192)  --block-size N (16)
 *        --rounds N (3)
 * A machine-floor row times a fixed JS loop of 15–30 µs the same way once per round: the p99 a shared VM adds by itself.
 * Measured, never asserted; always exits 0.
 */
import { createKvIndex } from "../src/core/create-kv-index.ts";
import type { KvIndex } from "../src/core/kv-index.ts";
import { ManualClock } from "../src/routing/clock.ts";
import type { RequestHandle } from "../src/routing/request-handle.ts";
import { Router } from "../src/routing/router.ts";
import type { DecisionSink } from "../src/routing/decision-record.ts";
import { formatDecisionLine } from "../src/decisions/decision-log-format.ts";

/** What the bench's sink asks for: the ring's table, the log's inputs, or the inputs formatted as the log's line. */
type CaptureMode = "candidates" | "inputs" | "log-line";
import { environment, percentile, table, writeResults } from "./harness.ts";
import * as hooks from "../test/support/kv-index-hooks.ts";

interface Args {
  workers: number[];
  requests: number;
  warmup: number;
  tokens: number;
  blockSize: number;
  rounds: number;
}

const FAMILIES = 32;
const CACHED_ON = 3;
const INFLIGHT_PER_WORKER = 4;

function parseArgs(argv: string[]): Args {
  // Each row builds a new router, and the engine re-tunes its compiled code on the new objects for the first couple of
  // thousand requests: after 1,000 the slowest 2% still sat in the first half of the measured run (p99 ÷ p50 3.5–4.1
  // at every size); after 3,000, 1.7–2.0, the machine's own floor being 1.3–1.5.
  const a: Args = { workers: [16, 64, 256], requests: 4000, warmup: 3000, tokens: 8192, blockSize: 16, rounds: 3 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]!, v = argv[++i];
    if (v === undefined) throw new Error(`${k} needs a value`);
    const int = (s: string): number => {
      const n = Number(s);
      if (!Number.isInteger(n) || n <= 0) throw new Error(`${k} needs positive integers, got ${s}`);
      return n;
    };
    switch (k) {
      case "--workers": a.workers = v.split(",").map(int); break;
      case "--requests": a.requests = int(v); break;
      case "--warmup": a.warmup = int(v); break;
      case "--tokens": a.tokens = int(v); break;
      case "--block-size": a.blockSize = int(v); break;
      case "--rounds": a.rounds = int(v); break;
      default: throw new Error(`unknown flag ${k}`);
    }
  }
  return a;
}

/** Deterministic token ids: the first half from the family, the rest unique to the request. */
function makePrompt(family: number, request: number, len: number): Uint32Array {
  const t = new Uint32Array(len);
  const half = len >> 1;
  let x = (family + 1) * 0x9e3779b1;
  for (let i = 0; i < len; i++) {
    if (i === half) x = (request + 1) * 0x85ebca6b + 0x1234567;
    x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + i) >>> 0;
    t[i] = x % 151_000;
  }
  return t;
}

export interface SelectResult {
  workers: number;
  assumeKvReuse: boolean;
  requests: number;
  promptBlocks: number;
  /** Whole synchronous admission: hash + match + score + booking, per request. */
  selectP50Us: number;
  selectP99Us: number;
  selectMeanUs: number;
  /** KvIndex.route inside that admission (router's inline timing). */
  wasmInlineP50Us: number;
  /** KvIndex.route alone on the same prompts (cross-check). */
  wasmAloneP50Us: number;
  wasmAloneP99Us: number;
  /** 1 − wasm/total, from per-request sums and from the medians. */
  outsideWasmShareMean: number;
  outsideWasmShareP50: number;
  /** Copying the last prompt's sequence hashes out of WASM as BigInts (part of the JS share, see report). */
  seqHashCopyP50Us: number;
  meanOverlapBlocks: number;
}

async function runOne(workers: number, assumeKvReuse: boolean, a: Args, capture?: CaptureMode): Promise<SelectResult> {
  const index: KvIndex = await createKvIndex({
    maxSlots: Math.max(64, workers), capacity: 1 << 18, maxPromptTokens: Math.max(a.tokens, 1 << 14), approxMaxBlocks: 1 << 16,
  });
  const clock = new ManualClock(0);
  // The sink keeps only the last record, so what is measured is the capture, not a growing array.
  let last: unknown;
  const decisions: DecisionSink | undefined = capture && {
    detail: capture === "candidates" ? "candidates" : "inputs",
    decided: (r) => { last = capture === "log-line" ? formatDecisionLine(r) : r; },
  };
  const router = new Router({ index, now: clock.now, decisions }, { assumeKvReuse, queueThreshold: null });
  for (let w = 0; w < workers; w++) {
    router.addWorker({ id: `w${w}`, endpoint: `http://w${w}`, models: ["m"], blockSize: a.blockSize, totalKvBlocks: 100_000 });
  }
  // Cache each family's shared prefix on CACHED_ON workers, as their KV events would report.
  const prefixBlocks = Math.floor(a.tokens / 2 / a.blockSize);
  for (let f = 0; f < FAMILIES; f++) {
    const h = index.hash(makePrompt(f, -1, a.tokens), { blockSize: a.blockSize });
    const blocks = h.local.slice(0, prefixBlocks).map((local, i) => ({ hash: h.seq[i]!, local }));
    for (let c = 0; c < CACHED_ON; c++) hooks.stored(index, `w${(f * 7 + c * 5) % workers}`, 0, null, blocks);
  }
  const total = a.warmup + a.requests;
  const prompts = Array.from({ length: 256 }, (_, i) => makePrompt(i % FAMILIES, i, a.tokens));
  const inflight: RequestHandle[] = [];
  const window = INFLIGHT_PER_WORKER * workers;
  const select = new Float64Array(a.requests), wasm = new Float64Array(a.requests);
  let overlapSum = 0;
  for (let i = 0; i < total; i++) {
    const tokens = prompts[i % prompts.length]!;
    clock.advance(1);
    const t0 = performance.now();
    const pending = router.route({ requestId: `r${i}`, tokens, model: "m" });
    const t1 = performance.now();
    // The admission above ran synchronously; awaiting only unwraps the already-settled promise.
    const out = await pending;
    if (out.kind !== "routed") throw new Error(`request ${i}: ${out.kind}`);
    if (i >= a.warmup) {
      select[i - a.warmup] = (t1 - t0) * 1000;
      wasm[i - a.warmup] = out.signals.timings.hashMatchMs * 1000;
      overlapSum += out.signals.overlapBlocks;
    }
    inflight.push(out.handle);
    if (inflight.length % 2 === 0) out.handle.firstToken();
    if (inflight.length > window) inflight.shift()!.finish();
  }
  if (capture && last === undefined) throw new Error("the decision sink was never told");
  // Cross-checks: index.route alone, and the copy of the sequence hashes the selector makes, on the same prompts.
  const alone = new Float64Array(a.requests), copy = new Float64Array(a.requests);
  const seqOut = new Uint32Array(2 * (Math.ceil(a.tokens / a.blockSize) + 1));
  for (let i = 0; i < a.warmup + a.requests; i++) {
    const tokens = prompts[i % prompts.length]!;
    const t0 = performance.now();
    index.route(tokens, { blockSize: a.blockSize });
    const t1 = performance.now();
    index.lastSequenceWordsInto(seqOut);
    const t2 = performance.now();
    if (i >= a.warmup) {
      alone[i - a.warmup] = (t1 - t0) * 1000;
      copy[i - a.warmup] = (t2 - t1) * 1000;
    }
  }
  let sumSel = 0, sumWasm = 0;
  for (let i = 0; i < a.requests; i++) {
    sumSel += select[i]!;
    sumWasm += wasm[i]!;
  }
  const p = (xs: Float64Array, q: number) => percentile(xs, q);
  return {
    workers, assumeKvReuse, requests: a.requests, promptBlocks: Math.floor(a.tokens / a.blockSize),
    selectP50Us: p(select, 50), selectP99Us: p(select, 99), selectMeanUs: sumSel / a.requests,
    wasmInlineP50Us: p(wasm, 50), wasmAloneP50Us: p(alone, 50), wasmAloneP99Us: p(alone, 99),
    outsideWasmShareMean: 1 - sumWasm / sumSel, outsideWasmShareP50: 1 - p(wasm, 50) / p(select, 50),
    seqHashCopyP50Us: p(copy, 50), meanOverlapBlocks: overlapSum / a.requests,
  };
}

/**
 * The machine's own tail: a fixed JS loop of `targetUs` to twice that, timed per sample like a selection. On a shared VM a
 * p99 includes preemptions and interrupts no code change removes; this row shows how much, in the same run.
 */
function machineFloor(targetUs: number, samples: number): { p50Us: number; p99Us: number } {
  const data = new Uint32Array(4096).map((_, i) => Math.imul(i + 1, 0x9e3779b1));
  const work = (reps: number): number => {
    let h = 0;
    for (let r = 0; r < reps; r++) for (let i = 0; i < data.length; i++) h = Math.imul(h ^ data[i]!, 0x2c1b3c6d) + r;
    return h;
  };
  let reps = 1, sink = 0;
  // Compiled before it is sized, or the first (interpreted) timings would make the loop a fraction of the target.
  for (let i = 0; i < 500; i++) sink ^= work(1);
  for (;;) {
    const t0 = performance.now();
    sink ^= work(reps);
    if ((performance.now() - t0) * 1000 >= targetUs || reps > 1 << 16) break;
    reps *= 2;
  }
  const xs = new Float64Array(samples);
  for (let i = 0; i < samples + 200; i++) {
    const t0 = performance.now();
    sink ^= work(reps);
    if (i >= 200) xs[i - 200] = (performance.now() - t0) * 1000;
  }
  if (sink === 0.5) console.log(sink);
  return { p50Us: percentile(xs, 50), p99Us: percentile(xs, 99) };
}

export async function main(args: string[]): Promise<void> {
  const a = parseArgs(args);
  console.log(`select: ${a.tokens}-token prompts, block size ${a.blockSize}, ${a.requests} measured requests (+${a.warmup} warm-up) per row`);
  const byRow = new Map<string, SelectResult[]>();
  const floors: { p50Us: number; p99Us: number }[] = [];
  for (let round = 0; round < a.rounds; round++) {
    floors.push(machineFloor(15, a.requests));
    for (const workers of a.workers) {
      for (const reuse of [true, false]) {
        const key = `${workers}/${reuse}`;
        if (!byRow.has(key)) byRow.set(key, []);
        byRow.get(key)!.push(await runOne(workers, reuse, a));
      }
    }
  }
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
  // Each figure's median over the rounds (the other fields are the same in every round).
  const results: SelectResult[] = [...byRow.values()].map((rs) => {
    const m = { ...rs[0]! } as Record<string, unknown>;
    for (const [k, v] of Object.entries(rs[0]!)) if (typeof v === "number") m[k] = median(rs.map((r) => (r as unknown as Record<string, number>)[k]!));
    return m as unknown as SelectResult;
  });
  const lo = Math.min(...a.workers), hi = Math.max(...a.workers);
  const scaling = [true, false].map((reuse) => {
    const small = byRow.get(`${lo}/${reuse}`)!, large = byRow.get(`${hi}/${reuse}`)!;
    return { reuse, perRound: large.map((r, i) => r.selectP50Us / small[i]!.selectP50Us), median: median(large.map((r, i) => r.selectP50Us / small[i]!.selectP50Us)) };
  });
  const us = (x: number) => x.toFixed(1);
  const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
  console.log(table(
    ["workers", "kv reuse", "p50 µs", "p99 µs", "mean µs", "wasm p50", "wasm alone p50/p99", "outside wasm (mean / p50)", "seq copy p50", "overlap"],
    results.map((r) => [
      String(r.workers), r.assumeKvReuse ? "yes" : "no", us(r.selectP50Us), us(r.selectP99Us), us(r.selectMeanUs), us(r.wasmInlineP50Us),
      `${us(r.wasmAloneP50Us)} / ${us(r.wasmAloneP99Us)}`, `${pct(r.outsideWasmShareMean)} / ${pct(r.outsideWasmShareP50)}`,
      us(r.seqHashCopyP50Us), r.meanOverlapBlocks.toFixed(0),
    ]),
  ));
  if (hi > lo) {
    for (const s of scaling) {
      console.log(`p50 at ${hi} workers / p50 at ${lo} (kv reuse ${s.reuse ? "on" : "off"}), paired per round: ${s.perRound.map((x) => x.toFixed(2)).join(" ")} → median ${s.median.toFixed(2)} (target ≤ 2)`);
    }
  }
  console.log(`p99 / p50 per row (target ≤ 4): ${results.map((r) => `${r.workers}${r.assumeKvReuse ? "" : " no-reuse"} ${(r.selectP99Us / r.selectP50Us).toFixed(1)}`).join(", ")}`);
  const floorRatio = median(floors.map((f) => f.p99Us / f.p50Us));
  console.log(`machine floor (a fixed JS loop timed the same way, once per round): p50 ${floors.map((f) => us(f.p50Us)).join(" / ")} µs, ` +
    `p99 ${floors.map((f) => us(f.p99Us)).join(" / ")} µs → p99/p50 median ${floorRatio.toFixed(2)}`);
  // Capture cost: three rounds of (none, candidates, inputs), interleaved so drift on a shared machine hits all alike.
  const capture: { workers: number; detail: string; selectP50Us: number; selectMeanUs: number; ratioP50: number; ratioMean: number }[] = [];
  for (const workers of a.workers) {
    const rows: Record<string, SelectResult[]> = { none: [], candidates: [], inputs: [], "log-line": [] };
    for (let round = 0; round < 3; round++) {
      rows.none!.push(await runOne(workers, true, a));
      rows.candidates!.push(await runOne(workers, true, a, "candidates"));
      rows.inputs!.push(await runOne(workers, true, a, "inputs"));
      rows["log-line"]!.push(await runOne(workers, true, a, "log-line"));
    }
    const base = rows.none!;
    for (const [detail, rs] of Object.entries(rows)) {
      const p50 = median(rs.map((r) => r.selectP50Us)), mean = median(rs.map((r) => r.selectMeanUs));
      capture.push({ workers, detail, selectP50Us: p50, selectMeanUs: mean, ratioP50: p50 / median(base.map((r) => r.selectP50Us)), ratioMean: mean / median(base.map((r) => r.selectMeanUs)) });
    }
  }
  console.log("decision capture (kv reuse on; median of 3 interleaved rounds; ratio to no sink in this run):");
  console.log(table(["workers", "sink detail", "p50 µs", "mean µs", "p50 ratio", "mean ratio"],
    capture.map((r) => [String(r.workers), r.detail, us(r.selectP50Us), us(r.selectMeanUs), r.ratioP50.toFixed(2), r.ratioMean.toFixed(2)])));
  const at64 = results.find((r) => r.workers === 64 && r.assumeKvReuse);
  if (at64) console.log(`target: p50 ≤ 25 µs at 64 workers — measured ${us(at64.selectP50Us)} µs (kv reuse on)`);
  const path = writeResults("select", { config: a, environment: environment(), results, rounds: Object.fromEntries(byRow), scaling, capture, machineFloor: { perRound: floors, p99OverP50: floorRatio } });
  console.log(`wrote ${path}`);
}
