/**
 * @module Approximate mode's learnt capacity end to end: a simulated engine without KV events whose real cache is a
 * quarter of what its worker declares. kvgate's LRU model of it over-predicts at first, then shrinks towards the engine's
 * size from the usage the engine reports, after which its predictions match what the engine serves.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createPrng } from "../../src/routing/prng.ts";
import { addWorker, post, startSim, startTestGateway, TOKEN } from "./helpers.ts";

const MODEL = "cap-model";
const BS = 16;
let open: { close(): Promise<void> }[] = [];

afterEach(async () => {
  await Promise.all(open.map((s) => s.close()));
  open = [];
});

async function complete(url: string, prompt: number[]): Promise<{ predicted: number; cached: number }> {
  const res = await post(`${url}/v1/completions`, { model: MODEL, prompt, max_tokens: 2 });
  expect(res.status).toBe(200);
  const body = await res.json() as { usage: { prompt_tokens_details?: { cached_tokens?: number } } };
  return { predicted: Number(res.headers.get("x-kvgate-overlap-blocks")!.split("/")[0]), cached: Math.floor((body.usage.prompt_tokens_details?.cached_tokens ?? 0) / BS) };
}

async function capacityMetric(url: string): Promise<number | undefined> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = text.split("\n").find((l) => l.startsWith("kvgate_approx_cache_capacity_blocks{"));
  return m === undefined ? undefined : Number(m.slice(m.lastIndexOf(" ") + 1));
}

describe("approximate mode's learnt capacity over HTTP", () => {
  it("should shrink the model of an engine whose cache is a quarter of the declared size until predictions hold", async () => {
    const gw = await startTestGateway(["--block-size", String(BS)]);
    const sim = await startSim(undefined, { model: MODEL, workerId: "a", blockSize: BS, numGpuBlocks: 64 });
    open.push(sim, gw);
    expect((await addWorker(gw.url, { url: sim.url, id: "a", kv_events: false, block_size: BS, total_kv_blocks: 256 })).status).toBe(201);
    // Twelve prompts of eight blocks, swept in order: 96 blocks cycle through a 64-block LRU, so every revisit misses.
    const rand = createPrng(11);
    const prompts = Array.from({ length: 12 }, () => Array.from({ length: 8 * BS }, () => 1 + Math.floor(rand() * 30_000)));
    const passes: { predicted: number; cached: number }[][] = [];
    for (let pass = 0; pass < 4; pass++) {
      const rows = [];
      for (const p of prompts) rows.push(await complete(gw.url, p));
      passes.push(rows);
    }
    // The declared size (95% of 256 blocks) holds every prompt: the second sweep starts predicted in full, and missed.
    // That one miss bounds the engine's cache: the prompt was last routed 88 blocks ago (eleven prompts since), so the
    // engine holds fewer, and the model drops to 88 at once (recency-bound.ts) instead of stepping down over four or
    // more misses; from the next prompt on it predicts what the engine serves (nothing: the sweep thrashes both).
    expect(passes[0]!.every((r) => r.predicted === 0 && r.cached === 0)).toBe(true);
    expect(passes[1]![0]).toEqual({ predicted: 8, cached: 0 });
    expect(passes[1]!.slice(1).every((r) => r.predicted === 0 && r.cached === 0)).toBe(true);
    const learnt = (await capacityMetric(gw.url))!;
    expect(learnt).toBeLessThan(96);
    expect(learnt).toBeGreaterThanOrEqual(64);
    // /v1/stats shows the same per rank, beside the running predicted and reported tokens.
    const stats = await (await fetch(`${gw.url}/v1/stats`, { headers: { authorization: `Bearer ${TOKEN}` } })).json() as { workers: { id: string; ranks: { prediction: Record<string, unknown> | null }[] }[] };
    expect(stats.workers.find((w) => w.id === "a")!.ranks[0]!.prediction).toMatchObject({ samples: 48, capacity_blocks: learnt, flagged: false });
    // The last two sweeps: the model thrashes as the engine does, and predicts what it serves.
    for (const pass of passes.slice(2)) expect(pass.filter((r) => r.predicted === r.cached).length).toBeGreaterThanOrEqual(11);
  }, 60_000);
});
