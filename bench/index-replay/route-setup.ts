/** @module The 8k-token route bench's fixture: a 64-slot index of ~1M entries holding its prompts, and a bare core for hashing alone. */
import { instantiateCore } from "../../src/wasm/instantiate.ts";
import { KvIndex } from "../../src/core/kv-index.ts";
import { budgetBytes, resolveOptions } from "../../src/core/kv-index-options.ts";
import { EventBatchWriter } from "../../src/core/event-encoder.ts";
import { BASE_SEED } from "../../src/core/hash-seeds.ts";
import { splitmix64, ENGINE_SALT } from "../trace-events.ts";
import { now } from "../harness.ts";

/** xorshift32 stream (deterministic filler). */
export function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s;
  };
}

export function rand64(next: () => number): bigint {
  return (BigInt(next()) << 32n) | BigInt(next());
}

export interface RouteSetup {
  idx: KvIndex;
  tokens: { typical: Uint32Array; worst: Uint32Array; unknown: Uint32Array };
  background: number;
  entries: number;
  setupMs: number;
}

/**
 * 64 slots. Prompt "typical": held in full by 2 workers and partially (1/8 … 6/8 of its blocks) by 6 more; prompt
 * "worst": held by all 64 workers at staggered depths ⌈n·(w+1)/64⌉ (one worker drops out every few blocks, so every
 * block is probed). Both are stored at block sizes 16 and 64. Background: random chains filling the index to
 * ~1M entries (default capacity 2^20), spread over all 64 slots.
 */
export async function routeSetup(module: WebAssembly.Module, backgroundTarget: number): Promise<RouteSetup> {
  const t0 = now();
  const idx = new KvIndex(module, { maxSlots: 64 });
  const slots = Array.from({ length: 64 }, (_, w) => idx.slotFor(`r${w}`, 0));
  const next = rng(0x6b766761);
  const mk = (): Uint32Array => Uint32Array.from({ length: 8192 }, () => next() % 151_936);
  const tokens = { typical: mk(), worst: mk(), unknown: mk() };
  const w = new EventBatchWriter(1 << 20);
  let prompt = 0;
  const storePrompt = (t: Uint32Array, bs: number, depthOf: (slot: number, n: number) => number): void => {
    const { local, seq } = idx.hash(t, { blockSize: bs });
    const engine = seq.map((s) => splitmix64(s ^ ENGINE_SALT));
    const n = local.length;
    for (let s = 0; s < 64; s++) {
      const d = depthOf(s, n);
      if (d <= 0) continue;
      w.reset();
      w.stored(slots[s]!, null, engine.slice(0, d), local.slice(0, d));
      const r = idx.applyBatch(w.bytes());
      if (r.records !== 1) throw new Error(`storing the prompt failed: ${JSON.stringify(r)}`);
      prompt += d;
    }
  };
  for (const bs of [16, 64]) {
    storePrompt(tokens.typical, bs, (s, n) => (s < 2 ? n : s < 8 ? Math.ceil((n * (s - 1)) / 8) : 0));
    storePrompt(tokens.worst, bs, (s, n) => Math.ceil((n * (s + 1)) / 64));
  }
  const cap = idx.options.capacity;
  const background = Math.max(0, Math.min(backgroundTarget, cap - prompt - 1024));
  const chain = 256;
  let done = 0, s = 0;
  w.reset();
  while (done < background) {
    const n = Math.min(chain, background - done);
    const hashes: bigint[] = [], locals: bigint[] = [];
    for (let i = 0; i < n; i++) {
      hashes.push(rand64(next));
      locals.push(rand64(next));
    }
    if (w.byteLength + 24 + 16 * n > idx.options.eventBytes) {
      idx.applyBatch(w.bytes());
      w.reset();
    }
    w.stored(slots[s]!, null, hashes, locals);
    s = (s + 1) % 64;
    done += n;
  }
  if (w.records > 0) idx.applyBatch(w.bytes());
  const entries = idx.stats().entries;
  const c = idx.counters();
  if (c.capacity + c.evicted + c.invalid + c.parentMissing > 0) throw new Error(`route setup did not apply cleanly: ${JSON.stringify(c)}`);
  return { idx, tokens, background, entries, setupMs: now() - t0 };
}

/** A raw core instance for hashing alone (hash_prompt: local + chained sequence hashes in one call). */
export function rawHasher(module: WebAssembly.Module): { hash: (bs: number) => number; load: (t: Uint32Array) => void } {
  const core = instantiateCore(module);
  const o = resolveOptions({ maxSlots: 1, capacity: 1024, promptTokens: 8192, maxPromptTokens: 8192, eventBlocks: 64, eventBytes: 4096, approxMaxBlocks: 1024 });
  const st = core.init(o.maxSlots, o.capacity, o.promptTokens, o.eventBlocks, o.eventBytes, o.maxMultimodal, o.approxMaxBlocks,
    o.pruneTargetRatio, 0, 0, Math.ceil(budgetBytes(o) / 65536));
  if (st !== 0) throw new Error(`raw core init: status ${st}`);
  const g = core.grow_prompt(o.promptTokens, o.promptTokens); // as KvIndex does: the SEQ/LOCAL regions hold a prompt
  if (g !== 0) throw new Error(`raw core grow_prompt: status ${g}`);
  const seedLo = Number(BASE_SEED & 0xffffffffn) | 0, seedHi = Number(BASE_SEED >> 32n) | 0;
  return {
    load: (t) => new Uint32Array(core.memory.buffer).set(t, core.tokens_ptr() >>> 2),
    hash: (bs) => core.hash_prompt(8192, bs, seedLo, seedHi, 0, 0),
  };
}
