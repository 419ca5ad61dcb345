/**
 * @module Another replica's in-flight prompt (its booking's sequence hashes, Router.remotePrompt) counts in the
 * selector's active-overlap column as a local booking does, leaves it when freed, and leaves with its worker.
 */
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/routing/clock.ts";
import { createPrng } from "../../src/routing/prng.ts";
import { Router } from "../../src/routing/router.ts";
import type { DecisionRecord } from "../../src/routing/decision-record.ts";
import type { KvIndex } from "../../src/core/kv-index.ts";
import { BS, prompt, smallIndex, worker } from "./helpers.ts";

/** The prompt's sequence hashes as (lo, hi) u32 pairs, as a peer's booking message carries them. */
function keysOf(index: KvIndex, tokens: Uint32Array): Uint32Array {
  const seq = index.hash(tokens, { blockSize: BS }).seq;
  const k = new Uint32Array(2 * seq.length);
  seq.forEach((h, i) => {
    const v = BigInt.asUintN(64, h);
    k[2 * i] = Number(v & 0xffffffffn);
    k[2 * i + 1] = Number(v >> 32n);
  });
  return k;
}

async function setup() {
  const index = await smallIndex();
  const records: DecisionRecord[] = [];
  const router = new Router({ index, now: new ManualClock(1_000).now, random: createPrng(5), fineNow: () => 0, decisions: { decided: (r) => records.push(r) } }, { queueThreshold: null });
  for (const id of ["a", "b", "c"]) router.addWorker(worker(id));
  const overlapOn = async (requestId: string, tokens: Uint32Array) => {
    const out = await router.route({ requestId, tokens, model: "m" });
    if (out.kind !== "routed") throw new Error(out.kind);
    out.handle.cancel();
    const rec = records.at(-1)!;
    return { worker: out.signals.worker, active: Object.fromEntries(rec.candidates.map((c) => [c.worker, c.activeOverlapBlocks])) };
  };
  return { index, router, overlapOn };
}

describe("remote in-flight prompts", () => {
  it("should credit a peer's in-flight prompt to its worker's active overlap and route the shared prefix there", async () => {
    const { index, router, overlapOn } = await setup();
    const peer = prompt(1, 20 * BS, 1);
    const keys = keysOf(index, peer);
    router.setRemoteLoad("b", 0, { requests: 1, prefillTokens: peer.length, blocks: 0 });
    expect(router.remotePrompt("b", 0, keys, 20, true)).toBe(true);
    // Shares 12 of its blocks with the peer's prompt: nothing is cached yet, but b is prefilling them.
    const mine = prompt(1, 16 * BS, 2, 12 * BS);
    const seen = await overlapOn("r1", mine);
    expect(seen.active).toEqual({ a: 0, b: 12, c: 0 });
    expect(router.remotePrompt("b", 0, keys, 20, false)).toBe(true);
    router.setRemoteLoad("b", 0, { requests: 0, prefillTokens: 0, blocks: 0 });
    expect((await overlapOn("r2", mine)).active).toEqual({ a: 0, b: 0, c: 0 });
    expect(router.remotePrompt("b", 0, keys, 20, false)).toBe(false);
  });

  it("should drop a removed worker's remote prompts so its slot credits no later worker", async () => {
    const { index, router, overlapOn } = await setup();
    const peer = prompt(3, 10 * BS, 1);
    const keys = keysOf(index, peer);
    router.setRemoteLoad("c", 0, { requests: 1, prefillTokens: 0, blocks: 0 });
    router.remotePrompt("c", 0, keys, 10, true);
    expect((await overlapOn("r1", peer)).active.c).toBe(10);
    router.removeWorker("c");
    router.addWorker(worker("d"));
    router.setRemoteLoad("d", 0, { requests: 1, prefillTokens: 0, blocks: 0 });
    expect((await overlapOn("r2", peer)).active).toEqual({ a: 0, b: 0, d: 0 });
    // The peer's free of the old booking finds nothing to remove.
    expect(router.remotePrompt("c", 0, keys, 10, false)).toBe(false);
  });
});
