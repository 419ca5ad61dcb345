/**
 * find_matches with a jump (KvIndex matchJump / the core's match_jump): on prefix-closed slots, as engines keep them,
 * every jump must give the exact depths of probing every block; on slots with holes it must follow the reference
 * model's jump rule; 1 and 2 mask words, both builds, long prompts with forks.
 */
import { describe, expect, it } from "vitest";
import { KvIndex } from "../../src/core/kv-index.ts";
import { EventBatchWriter } from "../../src/core/event-encoder.ts";
import { loadCoreModule } from "../../src/wasm/module-fs.ts";
import { ReferenceIndex, chainStep } from "../../src/reference/index-reference.ts";
import { seededRandom, type Random } from "../../src/core/seeded-random.ts";
import { KvgateError } from "../../src/core/errors.ts";
import * as hooks from "../support/kv-index-hooks.ts";

function matched(idx: KvIndex, query: readonly bigint[]): Map<number, number> {
  const n = idx.matchSequenceWords(hooks.sequenceWords(query));
  const out = new Map<number, number>();
  for (let i = 0; i < n; i++) out.set(idx.matches.slot(i), idx.matches.depth(i));
  return out;
}

/** A trunk of `length` blocks and a branch leaving it at every `forkEvery`-th block: chains of (local, seq). */
function chains(rnd: Random, length: number, forks: number): { local: bigint[]; seq: bigint[] }[] {
  const chain = (from: { local: bigint[]; seq: bigint[] } | null, at: number, n: number) => {
    const local = from ? from.local.slice(0, at) : [];
    const seq = from ? from.seq.slice(0, at) : [];
    for (let i = 0; i < n; i++) {
      const l = rnd.u64();
      local.push(l);
      seq.push(seq.length === 0 ? l : chainStep(seq[seq.length - 1]!, l));
    }
    return { local, seq };
  };
  const trunk = chain(null, 0, length);
  const out = [trunk];
  for (let f = 0; f < forks; f++) {
    const at = 1 + rnd.int(length - 1);
    out.push(chain(trunk, at, rnd.int(length - at) + 1));
  }
  return out;
}

const engineHash = (slot: number, seq: bigint): bigint => BigInt.asUintN(64, seq * 0x9e3779b97f4a7c15n + BigInt(slot + 1));

interface Fleet {
  idx: (jump: number) => Promise<KvIndex>;
  ref: ReferenceIndex;
  paths: { local: bigint[]; seq: bigint[] }[];
}

/**
 * Every slot stores a leading run of one or two paths (prefix-closed); with `holes`, each slot then loses a few
 * blocks inside its runs, as a lost or reordered Removed event would leave it. The same history goes to every
 * index `idx(jump)` builds and to the reference.
 */
function fleet(variant: "release" | "release-simd", slots: number, seed: number, holes: boolean): Fleet {
  const rnd = seededRandom(seed);
  const paths = chains(rnd, 1_500, 6);
  const ref = new ReferenceIndex(1 << 18, 1 << 10, 0.8);
  const w = new EventBatchWriter(1 << 22);
  const batches: Uint8Array[] = [];
  const history: { slot: number; stored?: { parent: bigint | null; hashes: bigint[]; locals: bigint[] }; removed?: bigint[] }[] = [];
  for (let s = 0; s < slots; s++) {
    ref.openSlot(s);
    const runs = 1 + rnd.int(2);
    for (let r = 0; r < runs; r++) {
      const path = paths[rnd.int(paths.length)]!;
      const d = rnd.next() < 0.1 ? 0 : 1 + rnd.int(path.seq.length);
      if (d === 0) continue;
      const hashes = path.seq.slice(0, d).map((x) => engineHash(s, x));
      history.push({ slot: s, stored: { parent: null, hashes, locals: path.local.slice(0, d) } });
      if (holes && d > 2) {
        const gone = new Set<bigint>();
        for (let k = 0; k < 1 + rnd.int(4); k++) gone.add(hashes[1 + rnd.int(d - 2)]!);
        history.push({ slot: s, removed: [...gone] });
      }
    }
  }
  for (const h of history) {
    w.reset();
    if (h.stored) {
      w.stored(h.slot, h.stored.parent, h.stored.hashes, h.stored.locals);
      ref.store(h.slot, h.stored.parent, h.stored.hashes.map((hash, i) => ({ hash, local: h.stored!.locals[i]! })));
    } else {
      w.removed(h.slot, h.removed!);
      ref.remove(h.slot, h.removed!);
    }
    batches.push(w.bytes().slice());
  }
  const idx = async (jump: number): Promise<KvIndex> => {
    const k = new KvIndex(await loadCoreModule(variant), { maxSlots: 128, capacity: 1 << 18, promptTokens: 64, eventBlocks: 4096, eventBytes: 1 << 22, matchJump: jump });
    for (let s = 0; s < slots; s++) expect(k.slotFor(`w${s}`, 0)).toBe(s);
    for (const b of batches) k.applyBatch(b);
    return k;
  };
  return { idx, ref, paths };
}

/** Queries: each path whole and cut at a few lengths (a cut at 1 and 2 included). */
function queries(rnd: Random, paths: { seq: bigint[] }[]): bigint[][] {
  const out: bigint[][] = [];
  for (const p of paths) {
    out.push(p.seq);
    for (const cut of [1, 2, 1 + rnd.int(p.seq.length), 1 + rnd.int(p.seq.length)]) out.push(p.seq.slice(0, cut));
  }
  return out;
}

const JUMPS = [1, 2, 7, 8, 64, 1024];

describe.each(["release", "release-simd"] as const)("find_matches with a jump (%s build)", (variant) => {
  it.each([8, 100])("should give the exact depths on %i prefix-closed slots at every jump", async (slots) => {
    const f = fleet(variant, slots, 40 + slots, false);
    const qs = queries(seededRandom(7), f.paths);
    for (const jump of JUMPS) {
      const idx = await f.idx(jump);
      for (const q of qs) expect(matched(idx, q)).toEqual(f.ref.findMatches(q, 1));
    }
  });

  it.each([8, 100])("should follow the reference's jump rule on %i slots with holes", async (slots) => {
    const f = fleet(variant, slots, 90 + slots, true);
    const qs = queries(seededRandom(8), f.paths);
    let differs = 0;
    for (const jump of JUMPS) {
      const idx = await f.idx(jump);
      for (const q of qs) {
        const want = f.ref.findMatches(q, jump);
        expect(matched(idx, q)).toEqual(want);
        if (jump > 1 && JSON.stringify([...want].sort()) !== JSON.stringify([...f.ref.findMatches(q, 1)].sort())) differs++;
      }
    }
    // The holes must be such that skipping them shows: otherwise this compares exact answers only.
    expect(differs).toBeGreaterThan(0);
  });

  it("should refuse a jump outside 1..1024", async () => {
    const mod = await loadCoreModule(variant);
    for (const matchJump of [0, 1025, 2.5]) expect(() => new KvIndex(mod, { matchJump })).toThrow(KvgateError);
  });
});
