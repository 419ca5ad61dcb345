import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/routing/clock.ts";
import { createPrng } from "../../src/routing/prng.ts";
import { Router } from "../../src/routing/router.ts";
import type { DecisionRecord, DecisionSink } from "../../src/routing/decision-record.ts";
import { fanOutDecisions } from "../../src/routing/decision-fanout.ts";
import { DecisionRing } from "../../src/gateway/decision-ring.ts";
import { BS, cache, prompt, smallIndex, worker } from "./helpers.ts";

function sink(detail?: DecisionSink["detail"], tokens?: boolean): DecisionSink & { records: DecisionRecord[] } {
  const records: DecisionRecord[] = [];
  return { detail, tokens, records, decided: (r) => records.push(r) };
}

async function setup(decisions?: DecisionSink) {
  const index = await smallIndex();
  const clock = new ManualClock(5_000);
  const router = new Router({ index, now: clock.now, random: createPrng(3), fineNow: () => 0, decisions }, { queueThreshold: null, overlapWeight: 1, newPrefillFactor: 1 });
  for (const id of ["a", "b", "c"]) router.addWorker(worker(id));
  return { index, router, clock };
}

async function route(router: Router, req: Parameters<Router["route"]>[0]) {
  const out = await router.route(req);
  if (out.kind !== "routed") throw new Error(out.kind);
  return out;
}

describe("decision capture", () => {
  it("tells the sink every booked decision with the table the kernel scored, the chosen row matching the signals", async () => {
    const s = sink();
    const { index, router } = await setup(s);
    const tokens = prompt(1, 160, 1);
    cache(index, "b", 0, tokens, 6);
    cache(index, "c", 0, tokens, 3);
    const first = await route(router, { requestId: "r1", tokens, model: "m" });
    expect(s.records).toHaveLength(1);
    const rec = s.records[0]!;
    expect(rec.at).toBe(5_000);
    expect(rec.model).toBe("m");
    expect(rec.signals).toBe(first.signals);
    expect(rec.candidates.map((c) => [c.worker, c.overlapBlocks])).toEqual([["a", 0], ["b", 6], ["c", 3]]);
    // Empty fleet, weight 1: cost = prefill blocks (uncached) + decode blocks of the prompt (10).
    for (const c of rec.candidates) {
      expect(c.prefillTokens).toBe(0);
      expect(c.decodeBlocks).toBe(0);
      expect(c.cost).toBe((160 - c.overlapBlocks * BS) / BS + 10);
    }
    expect(rec.candidates[rec.chosen!]!.worker).toBe(first.signals.worker);
    expect(first.signals.worker).toBe("b");
    expect(rec.inputs).toBeUndefined();
    // The next decision sees the first one's booking as load on b.
    await route(router, { requestId: "r2", tokens: prompt(2, 64, 2), model: "m" });
    const b = s.records[1]!.candidates.find((c) => c.worker === "b")!;
    expect(b.prefillTokens).toBe(160 - 6 * BS);
    expect(b.decodeBlocks).toBe(10);
  });

  it("records a pinned decision with an empty table, and queries only when they ask to explain", async () => {
    const s = sink();
    const { router } = await setup(s);
    const out = await route(router, { requestId: "t", tokens: prompt(1, 64, 1), target: { worker: "c" } });
    expect(s.records[0]!.candidates).toEqual([]);
    expect(s.records[0]!.chosen).toBe(-1);
    expect(out.decision?.signals.via).toBe("target");
    const q = await router.queryDecision({ requestId: "q", tokens: prompt(1, 64, 1) });
    expect(q.decision).toBeUndefined();
    const qe = await router.queryDecision({ requestId: "q2", tokens: prompt(1, 64, 1), explain: true });
    expect(qe.decision?.candidates).toHaveLength(3);
    expect(s.records).toHaveLength(1);
  });

  it("copies nothing without a sink unless the request asks to explain", async () => {
    const { router } = await setup();
    const plain = await route(router, { requestId: "p", tokens: prompt(1, 64, 1) });
    expect(plain.decision).toBeUndefined();
    const explained = await route(router, { requestId: "e", tokens: prompt(1, 64, 1), explain: true });
    expect(explained.decision?.candidates.map((c) => c.worker)).toEqual(["a", "b", "c"]);
    expect(explained.decision?.candidates[explained.decision.chosen!]!.worker).toBe(explained.signals.worker);
  });

  it("fills the replay inputs for an inputs sink: the prompt's sequence hashes, the draws, config and salts", async () => {
    const s = sink("inputs", true);
    const { index, router } = await setup(s);
    const tokens = prompt(4, 100, 1);
    await route(router, { requestId: "i", tokens, model: "m", namespace: "tenant-1", overrides: { overlapWeight: 2 } });
    const inp = s.records[0]!.inputs!;
    expect(inp.policy).toBe("kv");
    expect(inp.overlapWeight).toBe(2);
    expect(inp.temperature).toBe(0);
    expect(inp.blockSize).toBe(BS);
    expect(inp.namespace).toBe("tenant-1");
    expect(inp.tokens).toEqual(tokens);
    expect(inp.draws.length).toBeGreaterThanOrEqual(1);
    for (const d of inp.draws) expect(d >= 0 && d < 1).toBe(true);
    // Nothing is cached: a cold three-way tie, settled by rendezvous on the first block's hash.
    expect(inp.tie).toBe("rendezvous");
    expect(inp.tree).toEqual([0, 0, 0]);
    const words = new Uint32Array(2 * 6);
    index.route(tokens, { blockSize: BS, multimodal: [{ block: 0, hash: index.xxh3(new TextEncoder().encode("tenant-1"), 1n) }] });
    index.lastSequenceWordsInto(words);
    expect(inp.sequenceWords).toEqual(words);
    const seq0 = index.hash(tokens, { blockSize: BS, multimodal: [{ block: 0, hash: index.xxh3(new TextEncoder().encode("tenant-1"), 1n) }] }).seq[0]!;
    expect(BigInt(inp.sequenceWords[0]!) | (BigInt(inp.sequenceWords[1]!) << 32n)).toBe(seq0);
  });

  it("a warm tie logs the tree sizes and the second draw it consumed", async () => {
    const s = sink("inputs");
    const { index, router } = await setup(s);
    const tokens = prompt(5, 64, 1);
    cache(index, "a", 0, tokens, 2);
    cache(index, "b", 0, tokens, 2);
    cache(index, "b", 0, prompt(9, 64, 9), 4);
    await route(router, { requestId: "w", tokens, model: "m" });
    const rec = s.records[0]!;
    expect(rec.inputs!.tie).toBe("tree");
    expect(rec.inputs!.draws).toHaveLength(2);
    expect(rec.inputs!.tree).toEqual([2, 6, 0]);
    expect(rec.signals.worker).toBe("a");
  });
});

describe("DecisionRing and fan-out", () => {
  const rec = (i: number): DecisionRecord => ({ at: i, model: "m", signals: {} as DecisionRecord["signals"], candidates: [], inputs: { hashes: ["x"] } as never });

  it("keeps the last N, newest first, without the replay inputs", () => {
    const ring = new DecisionRing(3);
    expect(ring.recent()).toEqual([]);
    for (let i = 1; i <= 5; i++) ring.decided(rec(i));
    expect(ring.total).toBe(5);
    expect(ring.size).toBe(3);
    expect(ring.recent().map((r) => r.at)).toEqual([5, 4, 3]);
    expect(ring.recent(2).map((r) => r.at)).toEqual([5, 4]);
    expect(ring.recent(10)).toHaveLength(3);
    expect(ring.recent()[0]!.inputs).toBeUndefined();
    const none = new DecisionRing(0);
    none.decided(rec(1));
    expect(none.recent()).toEqual([]);
    expect(() => new DecisionRing(-1)).toThrow(RangeError);
  });

  it("fans out with the most detail any sink wants", () => {
    const a = sink("candidates"), b = sink("inputs", true);
    expect(fanOutDecisions([])).toBeUndefined();
    expect(fanOutDecisions([undefined, a])).toBe(a);
    const both = fanOutDecisions([a, b])!;
    expect(both.detail).toBe("inputs");
    expect(both.tokens).toBe(true);
    both.decided(rec(1));
    expect(a.records).toHaveLength(1);
    expect(b.records).toHaveLength(1);
    expect(fanOutDecisions([a, sink("candidates")])!.detail).toBe("candidates");
  });
});
