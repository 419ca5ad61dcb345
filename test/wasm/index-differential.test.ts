import { describe, it, expect } from "vitest";
import { KvIndex } from "../../src/core/kv-index.ts";
import { loadCoreModule } from "../../src/wasm/module-fs.ts";
import { ReferenceIndex, chainStep } from "../../src/reference/index-reference.ts";
import { EventBatchWriter } from "../../src/core/event-encoder.ts";
import { seededRandom, type Random } from "../../src/core/seeded-random.ts";
import * as hooks from "../support/kv-index-hooks.ts";

/**
 * Random operation sequences against the WASM index and the TS reference model, compared after every operation:
 * outcomes, per-slot tree sizes, TTL population, matches of random prompts, and the counters at the end.
 */

interface PromptNode {
  local: bigint;
  seq: bigint;
  parent: PromptNode | null;
  depth: number;
}

/** A forest of prompt prefixes with shared branches, so stores and matches overlap like real traffic. */
function buildUniverse(rnd: Random, size: number): PromptNode[] {
  const nodes: PromptNode[] = [];
  for (let i = 0; i < size; i++) {
    const parent = nodes.length > 0 && rnd.next() < 0.85 ? nodes[rnd.int(nodes.length)]! : null;
    const local = rnd.u64();
    nodes.push({ local, seq: parent ? chainStep(parent.seq, local) : local, parent, depth: parent ? parent.depth + 1 : 0 });
  }
  return nodes;
}

function pathTo(n: PromptNode): PromptNode[] {
  const p: PromptNode[] = [];
  for (let c: PromptNode | null = n; c; c = c.parent) p.push(c);
  return p.reverse();
}

interface Scenario {
  seed: number;
  ops: number;
  workers: number;
  ranks: number;
  capacity: number;
  approxMax: number;
  universe: number;
  /** Shares of Stored and Removed operations; the rest splits as below. */
  store: number;
  remove: number;
  /** Scales how often workers are cleared or leave (1 = default). */
  churn: number;
  /** Share of recorded decisions preceded by a new capacity for their slot (default 0.08; caps starve pruning). */
  capShare?: number;
  /** The core's match_jump (default 1: every block probed); the reference applies the same rule. */
  jump?: number;
}

async function runScenario(s: Scenario): Promise<void> {
  const rnd = seededRandom(s.seed);
  // Capacity operations draw from their own stream, so the rest of each scenario is the sequence it always was.
  const capRnd = seededRandom(s.seed + 1_000);
  const nodes = buildUniverse(rnd, s.universe);
  const idx = new KvIndex(await loadCoreModule("release"), {
    maxSlots: s.workers * s.ranks, capacity: s.capacity, approxMaxBlocks: s.approxMax, pruneTargetRatio: 0.8,
    promptTokens: 256, eventBlocks: 64, salt: BigInt(s.seed), matchJump: s.jump ?? 1,
  });
  const ref = new ReferenceIndex(s.capacity, s.approxMax, 0.8);
  // Engine block hashes: one per (worker group, prefix, variant); variant 1 models an engine naming a prefix twice.
  const engineHash = (slot: number, n: PromptNode, variant: number): bigint =>
    BigInt.asUintN(64, n.seq * 0x9e3779b97f4a7c15n + BigInt((slot % 2) * 7 + variant * 131));
  const live = new Set<string>();
  const key = (w: number, r: number): string => `w${w}`;
  const slotOf = (w: number, r: number): number => {
    const slot = idx.slotFor(key(w, r), r);
    if (!ref.open.has(slot)) ref.openSlot(slot);
    live.add(`${w}/${r}`);
    return slot;
  };
  let now = 1000;
  const batch = new EventBatchWriter();
  let digestsCompared = 0;
  const checkDigest = (): void => {
    for (const d of hooks.indexDigest(idx)) {
      const slot = idx.slots.get(d.worker, d.dpRank)!;
      const want = ref.digest(slot);
      expect({ blocks: d.blocks, digest: d.digest }, `digest of slot ${slot}`).toEqual({ blocks: want.blocks, digest: want.digest.toString(16).padStart(16, "0") });
      if (want.blocks > 0) digestsCompared++;
    }
  };

  let checks = 0;
  const check = (): void => {
    for (const [slot, k] of idx.slots.entries()) expect(hooks.treeSize(idx, k.worker, k.dpRank), `tree of slot ${slot}`).toBe(ref.treeSize(slot));
    // The digest walks the whole entry table, so every 499th check (and the last one) compares it.
    if (++checks % 499 === 0 || checks === s.ops) checkDigest();
    const st = idx.stats();
    expect(st.entries).toBe(ref.size);
    expect(st.ttlEntries).toBe(ref.ttlCount);
    expect(st.entries).toBeLessThanOrEqual(s.capacity);
  };

  for (let op = 0; op < s.ops; op++) {
    const w = rnd.int(s.workers), r = rnd.int(s.ranks);
    // After stores and removals: record 0.2, match 0.2, expire 0.03, clear 0.03·churn, leave 0.02·churn (normalised).
    const rest = 1 - s.store - s.remove;
    const shares = [0.2, 0.2, 0.03, 0.03 * s.churn, 0.02 * s.churn];
    const total = shares.reduce((a, b) => a + b, 0);
    const t = [s.store, s.store + s.remove];
    for (const share of shares.slice(0, 4)) t.push(t[t.length - 1]! + (rest * share) / total);
    const roll = rnd.next();
    if (roll < t[0]!) {
      // Stored: a run of a prompt path, from its root or continuing from a parent the worker may or may not hold.
      const slot = slotOf(w, r);
      const path = pathTo(nodes[rnd.int(nodes.length)]!);
      // Mostly continue where the worker's cached prefix ends, as an engine does; sometimes anywhere.
      let held = 0;
      while (held < path.length - 1 && ref.entries.get(slot)!.has(engineHash(slot, path[held]!, 0))) held++;
      const start = rnd.next() < 0.7 ? held : rnd.int(path.length);
      const run = path.slice(start, start + 1 + rnd.int(6));
      const variant = rnd.next() < 0.05 ? 1 : 0;
      const parent = start === 0 ? null : rnd.next() < 0.03 ? rnd.u64() : engineHash(slot, path[start - 1]!, 0);
      const blocks = run.map((n) => ({ hash: engineHash(slot, n, variant), local: n.local }));
      if (rnd.next() < 0.02 && blocks.length > 1) blocks[1] = { ...blocks[1]!, hash: blocks[0]!.hash };
      if (rnd.next() < 0.3) {
        batch.reset();
        batch.stored(slot, parent, blocks.map((b) => b.hash), blocks.map((b) => b.local));
        expect(idx.applyBatch(batch.bytes())).toEqual({ records: 1 });
        ref.store(slot, parent, blocks);
      } else {
        expect(hooks.stored(idx, key(w, r), r, parent, blocks)).toBe(ref.store(slot, parent, blocks));
      }
    } else if (roll < t[1]!) {
      // Removed: hashes the worker holds, hashes it does not, and hashes of other workers.
      const slot = slotOf(w, r);
      const held = [...ref.entries.get(slot)!.keys()];
      const hashes: bigint[] = [];
      const n = 1 + rnd.int(5);
      for (let i = 0; i < n; i++) {
        hashes.push(held.length > 0 && rnd.next() < 0.8 ? held[rnd.int(held.length)]! : rnd.next() < 0.5 ? rnd.u64() : engineHash(slot + 1, nodes[rnd.int(nodes.length)]!, 0));
      }
      const uniq = [...new Set(hashes)];
      if (rnd.next() < 0.3) {
        batch.reset();
        batch.removed(slot, uniq);
        expect(idx.applyBatch(batch.bytes())).toEqual({ records: 1 });
        ref.remove(slot, uniq);
      } else {
        expect(hooks.removed(idx, key(w, r), r, uniq)).toBe(ref.remove(slot, uniq));
      }
    } else if (roll < t[2]!) {
      // Approximate mode: a routing decision recorded with a TTL; time moves on (sometimes far).
      now += rnd.next() < 0.1 ? 60_000 + rnd.int(120_000) : rnd.int(2_000);
      const slot = slotOf(w, r);
      const path = pathTo(nodes[rnd.int(nodes.length)]!);
      const seqs = path.map((n) => n.seq);
      const ttl = 5_000 + rnd.int(200_000);
      // The closed loop's learnt capacity: sometimes set, sometimes lifted (0), often below what the slot holds.
      if (capRnd.next() < (s.capShare ?? 0.08)) {
        const cap = capRnd.next() < 0.2 ? 0 : 1 + capRnd.int(capRnd.next() < 0.5 ? 40 : 2 * s.approxMax);
        expect(idx.setSlotCapacity(key(w, r), r, cap)).toBe(ref.setCapacity(slot, cap));
      }
      const recorded = hooks.recordHashes(idx, key(w, r), r, seqs, now, ttl);
      expect(recorded).toBe(ref.record(slot, seqs, now, ttl));
      // The recency ages the closed loop bounds an engine's cache with (NEEDS), and the slot's clock.
      if (recorded >= 0) expect([...idx.lastRecordNeeds(seqs.length)]).toEqual(ref.lastNeeds);
      expect(idx.slotClockOf(slot)).toBe(ref.clocks.get(slot) ?? 0);
    } else if (roll < t[3]!) {
      // find_matches of a random prompt prefix.
      const path = pathTo(nodes[rnd.int(nodes.length)]!);
      const want = ref.findMatches(path.map((n) => n.seq), s.jump ?? 1);
      const got = hooks.findMatchesByHashes(idx, path.map((n) => n.seq));
      const gotMap = new Map(got.matches.map((m) => [idx.slots.get(m.worker, m.dpRank)!, m.blocks]));
      expect(gotMap).toEqual(want);
      for (const m of got.matches) expect(m.treeSize).toBe(ref.treeSize(idx.slots.get(m.worker, m.dpRank)!));
    } else if (roll < t[4]!) {
      now += rnd.int(30_000);
      expect(idx.expire(now)).toBe(ref.expire(now));
    } else if (roll < t[5]!) {
      const slot = slotOf(w, r);
      if (rnd.next() < 0.5) {
        batch.reset();
        batch.cleared(slot);
        expect(idx.applyBatch(batch.bytes())).toEqual({ records: 1 });
      } else {
        hooks.cleared(idx, key(w, r));
        // KvIndex.cleared covers every rank of the worker.
        for (let rr = 0; rr < s.ranks; rr++) {
          const other = idx.slots.get(key(w, rr), rr);
          if (other !== undefined && other !== slot) ref.clear(other);
        }
      }
      ref.clear(slot);
    } else {
      // Worker (or one rank) leaves; its slot is freed and may be reused by another worker later.
      const rankOnly = rnd.next() < 0.5;
      for (let rr = 0; rr < s.ranks; rr++) {
        if (rankOnly && rr !== r) continue;
        const slot = idx.slots.get(key(w, rr), rr);
        if (slot !== undefined) ref.closeSlot(slot);
      }
      idx.removeWorker(key(w, r), rankOnly ? r : undefined);
    }
    check();
  }
  const c = idx.counters();
  expect({
    applied: c.applied, parentMissing: c.parentMissing, invalid: c.invalid, capacity: c.capacity,
    unknownRemoved: c.unknownRemoved, evicted: c.evicted, expired: c.expired, pruned: c.pruned, capped: c.capped,
  }).toEqual({
    applied: ref.counters.applied, parentMissing: ref.counters.parentMissing, invalid: ref.counters.invalid,
    capacity: ref.counters.capacity, unknownRemoved: ref.counters.unknownRemoved, evicted: ref.counters.evicted,
    expired: ref.counters.expired, pruned: ref.counters.pruned, capped: ref.counters.capped,
  });
  // Every kind of event and pressure must actually have happened for the comparison to mean anything.
  expect(digestsCompared).toBeGreaterThan(0);
  expect(c.parentMissing).toBeGreaterThan(0);
  expect(c.invalid).toBeGreaterThan(0);
  expect(c.unknownRemoved).toBeGreaterThan(0);
  expect(c.expired).toBeGreaterThan(0);
  if (s.capShare !== 0) expect(c.capped).toBeGreaterThan(0);
  if (s.store > 0.4) {
    expect(c.evicted).toBeGreaterThan(0);
    expect(c.capacity).toBeGreaterThan(0);
  }
  if (s.approxMax < 200) expect(c.pruned).toBeGreaterThan(0);
}

describe("WASM index vs reference model on random operation sequences", () => {
  const scenarios: Scenario[] = [
    { seed: 1, ops: 50_000, workers: 6, ranks: 1, capacity: 400, approxMax: 40, universe: 300, store: 0.45, remove: 0.07, churn: 0.05 },
    { seed: 2, ops: 50_000, workers: 4, ranks: 2, capacity: 900, approxMax: 30, universe: 500, store: 0.34, remove: 0.18, churn: 1, jump: 2 },
    { seed: 3, ops: 40_000, workers: 40, ranks: 2, capacity: 2_000, approxMax: 1_500, universe: 800, store: 0.34, remove: 0.18, churn: 1, jump: 3 },
    { seed: 4, ops: 40_000, workers: 3, ranks: 1, capacity: 150, approxMax: 60, universe: 120, store: 0.5, remove: 0.05, churn: 0.05, capShare: 0 },
    { seed: 5, ops: 30_000, workers: 70, ranks: 1, capacity: 5_000, approxMax: 3_000, universe: 1_500, store: 0.34, remove: 0.18, churn: 1, jump: 2 },
  ];
  for (const s of scenarios) {
    it(`should agree on ${s.ops} operations (seed ${s.seed}, ${s.workers}×${s.ranks} slots, capacity ${s.capacity}, jump ${s.jump ?? 1})`, async () => {
      await runScenario(s);
    }, 300_000);
  }
});
