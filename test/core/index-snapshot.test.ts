/**
 * The index dump and load (warm restarts) against the TypeScript reference model: a WASM index driven by random events
 * and approximate-mode decisions is dumped, loaded into a fresh instance whose slots are numbered differently and whose
 * clock starts elsewhere, and must then agree with the reference on sizes, matches, TTL expiry and later events.
 */
import { describe, expect, it } from "vitest";
import { KvIndex } from "../../src/core/kv-index.ts";
import { dumpIndex, ENTRY_RECORD_BYTES, loadIndexDump } from "../../src/core/index-snapshot.ts";
import { loadCoreModule } from "../../src/wasm/module-fs.ts";
import { ReferenceIndex, chainStep } from "../../src/reference/index-reference.ts";
import { seededRandom, type Random } from "../../src/core/seeded-random.ts";
import * as hooks from "../support/kv-index-hooks.ts";

interface Node { local: bigint; seq: bigint; parent: Node | null }

function universe(rnd: Random, size: number): Node[] {
  const nodes: Node[] = [];
  for (let i = 0; i < size; i++) {
    const parent = nodes.length > 0 && rnd.next() < 0.85 ? nodes[rnd.int(nodes.length)]! : null;
    const local = rnd.u64();
    nodes.push({ local, seq: parent ? chainStep(parent.seq, local) : local, parent });
  }
  return nodes;
}

const pathTo = (n: Node): Node[] => {
  const p: Node[] = [];
  for (let c: Node | null = n; c; c = c.parent) p.unshift(c);
  return p;
};

const WORKERS = 5;
const name = (w: number) => `w${w}`;
const engineHash = (w: number, n: Node) => BigInt.asUintN(64, n.seq * 0x9e3779b97f4a7c15n + BigInt(w * 7 + 1));

async function index(capacity: number, approxMax = 60): Promise<KvIndex> {
  return new KvIndex(await loadCoreModule("release"), { maxSlots: 16, capacity, approxMaxBlocks: approxMax, pruneTargetRatio: 0.8, promptTokens: 256, eventBlocks: 64 });
}

describe("index dump and load", () => {
  for (const seed of [3, 17, 101]) {
    it(`should restore what the reference holds into a fresh index with other slots and another clock (seed ${seed})`, async () => {
      const rnd = seededRandom(seed);
      const nodes = universe(rnd, 200);
      const capacity = 800;
      const src = await index(capacity);
      const ref = new ReferenceIndex(capacity, 60, 0.8);
      // The reference is keyed by worker number (its "slot"); the WASM indexes by their own slot numbers.
      for (let w = 0; w < WORKERS; w++) {
        src.slotFor(name(w), 0);
        ref.openSlot(w);
      }
      let now = 5_000;
      for (let op = 0; op < 3_000; op++) {
        const w = rnd.int(WORKERS);
        // The last ops are decisions only, so TTL'd entries survive the stores' capacity evictions into the dump.
        const roll = op >= 2_900 ? 1 : rnd.next();
        if (roll < 0.55) {
          const path = pathTo(nodes[rnd.int(nodes.length)]!);
          let held = 0;
          while (held < path.length - 1 && ref.entries.get(w)!.has(engineHash(w, path[held]!))) held++;
          const run = path.slice(held, held + 1 + rnd.int(5));
          const parent = held === 0 ? null : engineHash(w, path[held - 1]!);
          const blocks = run.map((n) => ({ hash: engineHash(w, n), local: n.local }));
          expect(hooks.stored(src, name(w), 0, parent, blocks)).toBe(ref.store(w, parent, blocks));
        } else if (roll < 0.65) {
          const held = [...ref.entries.get(w)!.keys()];
          if (held.length === 0) continue;
          const h = held[rnd.int(held.length)]!;
          expect(hooks.removed(src, name(w), 0, [h])).toBe(ref.remove(w, [h]));
        } else {
          now += rnd.int(3_000);
          const seqs = pathTo(nodes[rnd.int(nodes.length)]!).map((n) => n.seq);
          const ttl = 10_000 + rnd.int(60_000);
          expect(hooks.recordHashes(src, name(w), 0, seqs, now, ttl)).toBe(ref.record(w, seqs, now, ttl));
        }
      }
      expect(src.stats().ttlEntries).toBeGreaterThan(0);
      expect(src.stats().entries).toBeGreaterThan(capacity / 2);
      // Entries past their TTL are not worth a snapshot: expire both first so the counts compare.
      src.expire(now);
      ref.expire(now);

      const dump = dumpIndex(src, now);
      expect(dump.records.length).toBe(ref.size * ENTRY_RECORD_BYTES);
      expect(dump.records.length).toBeLessThanOrEqual(capacity * ENTRY_RECORD_BYTES);

      // The restarted process: other slot numbers (a stranger took slot 0), and its clock starts near zero.
      const dst = await index(capacity);
      dst.slotFor("someone-else", 0);
      const offset = -now + 100;
      const later = now + offset;
      const r = loadIndexDump(dst, dump, later, () => true);
      expect(r).toEqual({ loaded: ref.size, skipped: 0 });
      expect(dst.stats().entries).toBe(ref.size);
      expect(dst.stats().ttlEntries).toBe(ref.ttlCount);
      for (let w = 0; w < WORKERS; w++) expect(hooks.treeSize(dst, name(w), 0), name(w)).toBe(ref.treeSize(w));
      for (let q = 0; q < 300; q++) {
        const seqs = pathTo(nodes[rnd.int(nodes.length)]!).map((n) => n.seq);
        const want = ref.findMatches(seqs, dst.options.matchJump);
        const got = new Map(hooks.findMatchesByHashes(dst, seqs).matches.map((m) => [Number(m.worker.slice(1)), m.blocks]));
        expect(got).toEqual(want);
      }
      // TTLs keep running on the new clock: what expires by a time expires by the same time shifted.
      const step = 40_000;
      expect(dst.expire(later + step)).toBe(ref.expire(now + step));
      expect(dst.stats().ttlEntries).toBe(ref.ttlCount);
      // Engine events keep applying to restored entries (their engine hashes came across).
      for (let w = 0; w < WORKERS; w++) {
        const held = [...ref.entries.get(w)!.keys()].slice(0, 3);
        expect(hooks.removed(dst, name(w), 0, held)).toBe(ref.remove(w, held));
        expect(hooks.treeSize(dst, name(w), 0)).toBe(ref.treeSize(w));
      }
    });
  }

  it("should skip the workers the loader does not accept, and entries it already holds", async () => {
    const src = await index(100);
    const n = universe(seededRandom(5), 20);
    for (const w of [0, 1]) hooks.stored(src, name(w), 0, null, [{ hash: engineHash(w, n[0]!), local: n[0]!.local }]);
    const dump = dumpIndex(src, 0);
    const dst = await index(100);
    expect(loadIndexDump(dst, dump, 0, (w) => w === "w1")).toEqual({ loaded: 1, skipped: 1 });
    expect(loadIndexDump(dst, dump, 0, () => true)).toEqual({ loaded: 1, skipped: 1 });
    expect(dst.stats().entries).toBe(2);
    // Records as a view at an odd offset of a larger buffer (a Node Buffer from the NATS client) load the same.
    const pool = new Uint8Array(dump.records.length + 7);
    pool.set(dump.records, 3);
    const other = await index(100);
    expect(loadIndexDump(other, { slots: dump.slots, records: Buffer.from(pool.buffer, 3, dump.records.length) }, 0, () => true)).toEqual({ loaded: 2, skipped: 0 });
    expect(hooks.treeSize(other, "w0", 0) + hooks.treeSize(other, "w1", 0)).toBe(2);
  });

  it("should load approximate blocks with an unknown recency, so a miss on one bounds no engine's cache", async () => {
    const src = await index(100);
    const path = pathTo(universe(seededRandom(9), 12)[11]!).map((x) => x.seq);
    expect(hooks.recordHashes(src, "w0", 0, path, 0, 60_000)).toBe(path.length);
    const dst = await index(100);
    expect(loadIndexDump(dst, dumpIndex(src, 0), 0, () => true).loaded).toBe(path.length);
    expect(hooks.recordHashes(dst, "w0", 0, path, 1, 60_000)).toBe(path.length);
    // Restored: at least 2^31 touches old (and never the 0xFFFFFFFF of a block the slot does not hold).
    expect([...dst.lastRecordNeeds(path.length)].every((x) => x >= 0x8000_0000 && x < 0xffff_ffff)).toBe(true);
    // Touched since: known again.
    expect(hooks.recordHashes(dst, "w0", 0, path, 2, 60_000)).toBe(path.length);
    expect(Math.max(...dst.lastRecordNeeds(path.length))).toBeLessThanOrEqual(path.length);
  });

  it("should stay within the loading index's capacity", async () => {
    const src = await index(200);
    const nodes = universe(seededRandom(9), 150).filter((x) => x.parent === null);
    for (const x of nodes) hooks.stored(src, name(0), 0, null, [{ hash: engineHash(0, x), local: x.local }]);
    const dump = dumpIndex(src, 0);
    const dst = await index(8);
    const r = loadIndexDump(dst, dump, 0, () => true);
    expect(r.loaded).toBe(8);
    expect(dst.stats().entries).toBe(8);
    expect(() => loadIndexDump(dst, { slots: dump.slots, records: dump.records.subarray(0, 33) }, 0, () => true)).toThrow(/whole number/);
  });
});
