/**
 * @module Derives the embedding examples' inputs from the captured vLLM event (test/fixtures/kv-events/kv_event_base.json):
 * the BlockStored event as a msgpack KVEventBatch and the prompt's token ids as little-endian u32. Run with --write.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { encodeKvEventBatch } from "../../src/sim/kv-event-codec.ts";

const DIR = new URL("../../test/fixtures/kv-events/", import.meta.url);
export const BATCH_FILE = new URL("kv_event_base.batch.msgpack", DIR);
export const TOKENS_FILE = new URL("kv_event_base.tokens.u32le", DIR);

export function captureFixture(): { batch: Uint8Array; tokens: Uint8Array } {
  const text = readFileSync(new URL("kv_event_base.json", DIR), "utf8");
  const ev = JSON.parse(text) as { token_ids: number[]; block_size: number; medium: string };
  // uint64 hashes lose precision as JSON numbers: read them as text.
  const hashes = /"block_hashes"\s*:\s*\[([^\]]*)\]/.exec(text)![1]!.split(",").map((s) => BigInt(s.trim()));
  const batch = encodeKvEventBatch({ ts: 1, data_parallel_rank: 0, events: [{
    type: "BlockStored", block_hashes: hashes, parent_block_hash: null, token_ids: ev.token_ids, block_size: ev.block_size,
    lora_id: null, medium: ev.medium, lora_name: null,
  }] });
  const tokens = new Uint8Array(ev.token_ids.length * 4);
  const v = new DataView(tokens.buffer);
  ev.token_ids.forEach((t, i) => v.setUint32(4 * i, t, true));
  return { batch, tokens };
}

if (process.argv.includes("--write")) {
  const { batch, tokens } = captureFixture();
  writeFileSync(BATCH_FILE, batch);
  writeFileSync(TOKENS_FILE, tokens);
  console.log(`wrote ${batch.length} + ${tokens.length} bytes`);
}
