/**
 * @module The closed loop's blind worker end to end: two simulated engines declared with KV events, but only one's
 * events reach the gateway. Once the other has prefilled for a while with no event of it arriving, the gateway says so
 * (metrics, stats) and records what it routes there, so a repeated prompt is predicted and sent back to its cache.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createPrng } from "../../src/routing/prng.ts";
import { addWorker, post, startSim, startTestGateway, TOKEN, type TestGateway } from "./helpers.ts";

const MODEL = "blind-model";
const BS = 16;
let open: { close(): Promise<void> }[] = [];

afterEach(async () => {
  await Promise.all(open.map((s) => s.close()));
  open = [];
});

async function fleet(loop: boolean): Promise<TestGateway> {
  const gw = await startTestGateway([loop ? "--closed-loop" : "--no-closed-loop", "--block-size", String(BS)]);
  // "seen" pushes its KV events to the gateway; "dark" publishes none the gateway receives.
  const seen = await startSim(gw.url, { model: MODEL, workerId: "seen", blockSize: BS });
  const dark = await startSim(undefined, { model: MODEL, workerId: "dark", blockSize: BS });
  open.push(seen, dark, gw);
  for (const [id, s] of [["seen", seen], ["dark", dark]] as const) {
    expect((await addWorker(gw.url, { url: s.url, id, kv_events: true, block_size: BS })).status).toBe(201);
  }
  return gw;
}

async function complete(gw: TestGateway, prompt: number[], worker?: string): Promise<{ worker: string; predicted: number; cached: number }> {
  const res = await post(`${gw.url}/v1/completions`, { model: MODEL, prompt, max_tokens: 2, ...(worker ? { kvgate: { worker_id: worker } } : {}) });
  expect(res.status).toBe(200);
  const body = await res.json() as { usage: { prompt_tokens_details?: { cached_tokens?: number } } };
  return {
    worker: res.headers.get("x-kvgate-worker")!, predicted: Number(res.headers.get("x-kvgate-overlap-blocks")!.split("/")[0]),
    cached: body.usage.prompt_tokens_details?.cached_tokens ?? 0,
  };
}

async function metrics(gw: TestGateway): Promise<string> {
  return (await fetch(`${gw.url}/metrics`)).text();
}

/** Sends distinct prompts to the dark worker for a little over 2 s (the loop's silence window), then one repeat. */
async function scenario(loop: boolean) {
  const gw = await fleet(loop);
  const rand = createPrng(9);
  const prompt = () => Array.from({ length: 8 * BS }, () => 1 + Math.floor(rand() * 30_000));
  const start = Date.now();
  let sent = 0;
  while (sent < 8 || Date.now() - start < 2_300) {
    const r = await complete(gw, prompt(), "dark");
    expect(r.cached).toBe(0);
    sent++;
    await new Promise((res) => setTimeout(res, 100));
  }
  // The silence is judged on each answer: this one (and the ones after) are routed as an approximate worker's.
  const p = prompt(), q = prompt();
  const first = await complete(gw, p);
  const again = await complete(gw, p);
  await complete(gw, q, "dark");
  const pinned = await complete(gw, q, "dark");
  return { gw, first, again, pinned, text: await metrics(gw), stats: await (await fetch(`${gw.url}/v1/stats`, { headers: { authorization: `Bearer ${TOKEN}` } })).json() as Record<string, unknown> };
}

describe("closed loop: a KV-event worker whose events never arrive", () => {
  it("is found blind, says so, and gets its repeated prompts back", async () => {
    const { first, again, pinned, text, stats } = await scenario(true);
    expect(text).toMatch(/^kvgate_index_blind_total\{worker="dark"\} 1$/m);
    expect(text).toMatch(/^kvgate_index_blind\{dp_rank="0",worker="dark"\} 1$/m);
    expect(text).not.toMatch(/^kvgate_index_blind_total\{worker="seen"\}/m);
    const ranks = (stats.workers as { id: string; ranks: { prediction?: { blind?: boolean } }[] }[]).find((w) => w.id === "dark")!.ranks;
    expect(ranks[0]!.prediction?.blind).toBe(true);
    // Whichever worker the first copy went to, the second follows it with the prompt predicted as cached.
    expect(again.worker).toBe(first.worker);
    expect(again.predicted).toBe(8);
    expect(again.cached).toBeGreaterThan(0);
    expect(pinned).toMatchObject({ predicted: 8, cached: 7 * BS });
  }, 60_000);

  it("stays blind to the dark worker's cache with the loop off", async () => {
    const { pinned, text } = await scenario(false);
    expect(text).not.toMatch(/^kvgate_index_blind_total\{/m);
    // The engine has the prompt (all but its last block, which it recomputes); the gateway does not know.
    expect(pinned).toMatchObject({ predicted: 0, cached: 7 * BS });
  }, 60_000);
});
