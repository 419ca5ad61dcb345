/**
 * KvIndex.matchSequenceWords, the BigInt-free match for hashes computed elsewhere: it must report exactly what the
 * BigInt form (findMatchesByHashes) reports, for shared prefixes at several depths, prompts longer than the
 * prompt regions (they grow), an odd trailing word (ignored), and an empty query; with 1 and 2 mask words.
 */
import { describe, expect, it } from "vitest";
import { KvIndex } from "../../src/core/kv-index.ts";
import { EventBatchWriter } from "../../src/core/event-encoder.ts";
import { loadCoreModule } from "../../src/wasm/module-fs.ts";
import { chainStep } from "../../src/reference/index-reference.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";
import * as hooks from "../support/kv-index-hooks.ts";

function pairs(idx: KvIndex, n: number): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0; i < n; i++) out.push([idx.matches.slot(i), idx.matches.depth(i)]);
  return out.sort((a, b) => a[0] - b[0]);
}

describe.each(["release", "release-simd"] as const)("matchSequenceWords (%s build)", (variant) => {
  it.each([8, 100])("should agree with findMatchesByHashes on %i slots at random depths", async (slots) => {
    const idx = new KvIndex(await loadCoreModule(variant), { maxSlots: 128, capacity: 1 << 17, promptTokens: 64, eventBlocks: 64 });
    const rnd = seededRandom(19);
    const length = 700; // more blocks than the 64-token prompt regions hold: the call must grow them
    const locals = Array.from({ length }, () => rnd.u64());
    const seq: bigint[] = [];
    for (const l of locals) seq.push(seq.length === 0 ? l : chainStep(seq[seq.length - 1]!, l));
    const w = new EventBatchWriter(1 << 20);
    const depths: number[] = [];
    for (let s = 0; s < slots; s++) {
      const slot = idx.slotFor(`w${s}`, 0);
      const d = rnd.int(length + 1);
      depths.push(d);
      if (d === 0) continue;
      const engine = seq.slice(0, d).map((x, i) => BigInt.asUintN(64, x ^ BigInt(s * 1000 + i + 1)));
      w.reset();
      w.stored(slot, null, engine, locals.slice(0, d));
      expect(idx.applyBatch(w.bytes()).records).toBe(1);
    }
    for (const cut of [length, 1, 33, 512]) {
      const query = seq.slice(0, cut);
      const expected = hooks.findMatchesByHashes(idx, query).matches
        .map((m): [number, number] => [idx.slots.get(m.worker, m.dpRank)!, m.blocks]).sort((a, b) => a[0] - b[0]);
      const n = idx.matchSequenceWords(hooks.sequenceWords(query));
      expect(pairs(idx, n)).toEqual(expected);
      // And against the depths stored: every slot holding the first block, at min(its depth, the query's length).
      expect(pairs(idx, n)).toEqual(depths.map((d, s): [number, number] => [s, Math.min(d, cut)]).filter(([, d]) => d > 0));
    }
    const odd = new Uint32Array(2 * 40 + 1);
    odd.set(hooks.sequenceWords(seq.slice(0, 40)));
    odd[80] = 0xdeadbeef;
    const nOdd = idx.matchSequenceWords(odd);
    expect(pairs(idx, nOdd)).toEqual(pairs(idx, idx.matchSequenceWords(hooks.sequenceWords(seq.slice(0, 40)))));
    expect(idx.matchSequenceWords(new Uint32Array(0))).toBe(0);
    expect(idx.matchSequenceWords(hooks.sequenceWords([rnd.u64()]))).toBe(0);
  });
});
