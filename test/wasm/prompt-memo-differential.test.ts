/**
 * The core's prompt memo (assembly/hash/prompt-memo.ts) against the same core with the memo off, on random
 * conversations: growing turns, shared system prompts, edits inside a prompt, salts, block sizes, EAGLE windows,
 * multimodal prompts and a ring small enough to wrap and evict. The memo-off hashes are themselves checked against
 * the BigInt reference (prompt-and-score-differential.test.ts); a sample is checked here too.
 */
import { describe, it, expect } from "vitest";
import { KvIndex } from "../../src/core/kv-index.ts";
import { KvgateError } from "../../src/core/errors.ts";
import { loadCoreModule } from "../../src/wasm/module-fs.ts";
import { hashPromptReference } from "../../src/reference/block-hash-reference.ts";
import { seededRandom, type Random } from "../../src/core/seeded-random.ts";
import type { HashOptions } from "../../src/core/hash-seeds.ts";

const VARIANTS = ["release", "release-simd"] as const;

interface Conversation { tokens: number[]; opts: HashOptions }

function words(rnd: Random, n: number): number[] {
  // A small vocabulary so that edits sometimes restore the original token and prompts share runs by chance.
  return Array.from({ length: n }, () => rnd.int(rnd.next() < 0.5 ? 8 : 50_000));
}

function step(rnd: Random, convs: Conversation[], system: number[][]): Conversation {
  const r = rnd.next();
  if (convs.length === 0 || r < 0.15) {
    const bs = [1, 3, 16, 16, 64, 64][rnd.int(6)]!;
    const c: Conversation = {
      tokens: [...system[rnd.int(system.length)]!, ...words(rnd, rnd.int(3 * bs))],
      opts: { blockSize: bs, lora: rnd.next() < 0.3 ? `lora-${rnd.int(2)}` : undefined, eagle: rnd.next() < 0.25 },
    };
    convs.push(c);
    if (convs.length > 10) convs.shift();
    return c;
  }
  const c = convs[rnd.int(convs.length)]!;
  const bs = c.opts.blockSize;
  if (r < 0.7) c.tokens = [...c.tokens, ...words(rnd, 1 + rnd.int(4 * bs))]; // the next turn
  else if (r < 0.8 && c.tokens.length > 0) c.tokens[rnd.int(c.tokens.length)] = rnd.int(8); // an edit inside the prompt
  else if (r < 0.9) c.tokens = c.tokens.slice(0, rnd.int(c.tokens.length + 1)); // a shorter retry
  return c; // else: the same prompt again
}

describe("prompt memo", () => {
  it.each([
    ["release", 6, 16 << 10], ["release-simd", 6, 16 << 10], ["release-simd", 128, 8 << 20],
  ] as const)("should give the memo-off hashes on random conversations (%s build, %i entries over %i bytes)", async (variant, entries, bytes) => {
    const mod = await loadCoreModule(variant);
    const memo = new KvIndex(mod, { capacity: 1024, maxSlots: 4, promptTokens: 256, promptMemoEntries: entries, promptMemoBytes: bytes });
    const plain = new KvIndex(mod, { capacity: 1024, maxSlots: 4, promptTokens: 256, promptMemoEntries: 0, promptMemoBytes: 0 });
    const rnd = seededRandom(77);
    const system = [words(rnd, 0), words(rnd, 40), words(rnd, 300)];
    const convs: Conversation[] = [];
    let checkedAgainstReference = 0;
    for (let k = 0; k < 1500; k++) {
      const c = step(rnd, convs, system);
      const x = rnd.next();
      const opts: HashOptions = {
        ...c.opts,
        memo: x < 0.05 ? false : undefined,
        multimodal: x > 0.97 && c.tokens.length >= 2 * c.opts.blockSize ? [{ block: 1, hash: rnd.u64() }] : undefined,
      };
      const got = memo.hash(c.tokens, opts);
      expect(got, JSON.stringify({ k, n: c.tokens.length, opts: { ...opts, multimodal: undefined } })).toEqual(plain.hash(c.tokens, opts));
      expect(memo.lastBlocks).toBe(got.local.length);
      if (k % 50 === 0 && c.tokens.length < 2000) {
        expect(got).toEqual(hashPromptReference(c.tokens, opts));
        checkedAgainstReference++;
      }
    }
    expect(checkedAgainstReference).toBeGreaterThan(20);
    // The comparison means something only if the memo supplied hashes, and the ring wrapped (16 KiB over 1,500 prompts).
    const { memoReused, memoHashed } = memo.counters();
    expect(memoReused).toBeGreaterThan(0.3 * (memoReused + memoHashed));
    expect(plain.counters().memoReused).toBe(0);
  });

  it.each(VARIANTS)("should reuse exactly the blocks a remembered prompt shares, and hash the rest (%s build)", async (variant) => {
    const idx = new KvIndex(await loadCoreModule(variant), { capacity: 1024, maxSlots: 4 });
    const rnd = seededRandom(3);
    const p = words(rnd, 160); // 10 blocks of 16
    const delta = (f: () => void): [number, number] => {
      const a = idx.counters();
      f();
      const b = idx.counters();
      return [b.memoReused - a.memoReused, b.memoHashed - a.memoHashed];
    };
    expect(delta(() => idx.hash(p, { blockSize: 16 }))).toEqual([0, 10]); // a new block-0 key: only the key is noted
    expect(delta(() => idx.hash(p, { blockSize: 16 }))).toEqual([0, 10]); // seen before: remembered now
    expect(delta(() => idx.hash(p, { blockSize: 16 }))).toEqual([9, 1]); // block 0 is the key: always hashed
    const next = [...p, ...words(rnd, 90)]; // 15 blocks, the first 10 shared
    expect(delta(() => idx.hash(next, { blockSize: 16 }))).toEqual([9, 6]);
    const edited = [...next];
    edited[4 * 16 + 7] = edited[4 * 16 + 7]! + 1; // inside block 4
    expect(delta(() => idx.hash(edited, { blockSize: 16 }))).toEqual([3, 12]);
    // EAGLE windows take one token of the next block: an edit at block 5's first token spoils block 4 too.
    const eagle = [...next];
    eagle[5 * 16] = eagle[5 * 16]! + 1;
    for (let i = 0; i < 2; i++) idx.hash(next, { blockSize: 16, eagle: true });
    expect(delta(() => idx.hash(eagle, { blockSize: 16, eagle: true }))).toEqual([3, 12]);
    // Another seed (LoRA) or block size never takes these hashes.
    expect(delta(() => idx.hash(next, { blockSize: 16, lora: "a" }))).toEqual([0, 15]);
    expect(delta(() => idx.hash(next, { blockSize: 16, memo: false }))).toEqual([0, 0]);
  });

  it.each(VARIANTS)("should find each conversation's own history when many share one system prompt (%s build)", async (variant) => {
    const mod = await loadCoreModule(variant);
    const idx = new KvIndex(mod, { capacity: 1024, maxSlots: 4 });
    const plain = new KvIndex(mod, { capacity: 1024, maxSlots: 4, promptMemoEntries: 0, promptMemoBytes: 0 });
    const rnd = seededRandom(8);
    const system = words(rnd, 300);
    const convs = Array.from({ length: 40 }, () => [...system]);
    let reused = 0, blocks = 0;
    for (let round = 0; round < 6; round++) {
      const before = idx.counters();
      for (const c of convs) {
        c.push(...words(rnd, 100)); // this conversation's next turn
        expect(idx.hash(c, { blockSize: 16 })).toEqual(plain.hash(c, { blockSize: 16 }));
      }
      const after = idx.counters();
      reused = after.memoReused - before.memoReused;
      blocks = reused + after.memoHashed - before.memoHashed;
    }
    // In the last round every conversation finds its previous turn (all but the ~6 new blocks and block 0 of each),
    // not only the 18 blocks of the shared system prompt.
    expect(reused / blocks).toBeGreaterThan(0.8);
  });

  it.each(VARIANTS)("should stay exact when a route reuses hashes and leave route results unchanged (%s build)", async (variant) => {
    const mod = await loadCoreModule(variant);
    const a = new KvIndex(mod, { capacity: 4096, maxSlots: 4 });
    const b = new KvIndex(mod, { capacity: 4096, maxSlots: 4, promptMemoEntries: 0, promptMemoBytes: 0 });
    const rnd = seededRandom(9);
    const base = words(rnd, 640);
    for (const idx of [a, b]) {
      idx.route(base.slice(0, 320), { blockSize: 16 });
      expect(idx.recordRoute("w0", 0, 0)).toBe(20);
    }
    const wa = new Uint32Array(200), wb = new Uint32Array(200);
    for (const len of [640, 640, 500, 320, 100, 640]) {
      const na = a.route(base.slice(0, len), { blockSize: 16 }), nb = b.route(base.slice(0, len), { blockSize: 16 });
      expect(na).toBe(nb);
      expect(a.matches.depth(0)).toBe(b.matches.depth(0));
      expect(a.lastSequenceWordsInto(wa)).toBe(b.lastSequenceWordsInto(wb));
      expect(wa).toEqual(wb);
    }
  });

  it("should refuse memo settings that are half off or out of range", async () => {
    const mod = await loadCoreModule();
    for (const o of [{ promptMemoEntries: 0 }, { promptMemoBytes: 0 }, { promptMemoEntries: 4097 }, { promptMemoEntries: -1, promptMemoBytes: 0 }, { promptMemoBytes: 1.5 }]) {
      expect(() => new KvIndex(mod, { capacity: 1024, ...o }), JSON.stringify(o)).toThrow(KvgateError);
    }
  });
});
