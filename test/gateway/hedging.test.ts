/**
 * @module TTFT hedging: the policy's learnt thresholds and budget, a hedge that wins, and a seeded property run
 * with slow, failing and cancelled streams in which the budget is never exceeded and every booking is freed.
 */
import { describe, expect, it } from "vitest";
import { HedgePolicy } from "../../src/gateway/hedge-policy.ts";
import { createPrng, randomInt } from "../../src/routing/prng.ts";
import { chatChunk, data, fakeGateway, type SeenRequest } from "./fake-workers.ts";

const encoder = new TextEncoder();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A chat stream whose first chunk comes after `firstMs`, then `tokens` chunks, usage and [DONE]. */
function stream(req: SeenRequest, firstMs: number, tokens: number): Response {
  const id = `chatcmpl-${req.worker}`;
  const parts = [chatChunk(id, undefined, null, "assistant"), ...Array.from({ length: tokens }, (_, i) => chatChunk(id, `t${i} `)),
    chatChunk(id, undefined, "length")].map(data);
  parts.push(data({ ...chatChunk(id, undefined), choices: [], usage: { prompt_tokens: 40, completion_tokens: tokens, total_tokens: 40 + tokens } }), data("[DONE]"));
  let i = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(c) {
      if (req.signal.aborted) return c.error(new DOMException("aborted", "AbortError"));
      if (i === 0) {
        await Promise.race([sleep(firstMs), new Promise((r) => req.signal.addEventListener("abort", r, { once: true }))]);
        if (req.signal.aborted) return c.error(new DOMException("aborted", "AbortError"));
      }
      if (i < parts.length) c.enqueue(encoder.encode(parts[i++]!));
      else c.close();
    },
  });
  return new Response(body, { headers: { "content-type": "text/event-stream" } });
}

describe("HedgePolicy", () => {
  it("learns a threshold per prompt-size class once it has enough samples", () => {
    const p = new HedgePolicy({ budget: 0.1, quantile: 0.9, minSamples: 10, window: 10 });
    for (let i = 1; i <= 9; i++) p.observeTtft(100, i * 10);
    expect(p.thresholdMs(100)).toBeUndefined();
    p.observeTtft(120, 100);
    expect(p.thresholdMs(110)).toBe(100);
    // Another size class knows nothing yet.
    expect(p.thresholdMs(4000)).toBeUndefined();
  });

  it("never lets hedges exceed budget × requests", () => {
    const p = new HedgePolicy({ budget: 0.05 });
    const rand = createPrng(3);
    for (let i = 0; i < 5000; i++) {
      p.countRequest();
      if (rand() < 0.5) p.tryAcquire();
      expect(p.stats.hedges).toBeLessThanOrEqual(0.05 * p.stats.requests + 1e-9);
    }
    // Asking half the time still uses nearly all of it.
    expect(p.stats.hedges).toBeGreaterThanOrEqual(247);
    expect(p.stats.hedges).toBeLessThanOrEqual(250);
  });

  it("is off at budget 0 and rejects impossible settings", () => {
    const p = new HedgePolicy();
    p.countRequest();
    expect(p.enabled).toBe(false);
    expect(p.tryAcquire()).toBe(false);
    expect(() => new HedgePolicy({ budget: 2 })).toThrow(RangeError);
    expect(() => new HedgePolicy({ quantile: 1 })).toThrow(RangeError);
  });
});

describe("hedged streams through the gateway", () => {
  it("serves from the copy when the chosen worker is slow, and frees the loser's booking", async () => {
    // Thresholds are known only after the fourth warm-up answer, so none of those is hedged, however slow this machine.
    const { gw, fleet, call } = await fakeGateway(2, ["--hedge-budget", "0.5", "--hedge-min-samples", "4", "--hedge-quantile", "0.5"]);
    let slowWorker: string | undefined;
    for (const w of ["w1", "w2"]) fleet.scripts.set(w, (req) => stream(req, req.worker === slowWorker ? 5_000 : 2, 3));
    // Several blocks long: a prompt shorter than one block has no cached prefix to follow.
    const body = (n: number) => ({ model: "m", stream: true, messages: [{ role: "user", content: `hello ${n} ${"and some more words ".repeat(40)}` }] });
    for (let n = 0; n < 4; n++) expect(await (await call("/v1/chat/completions", body(n))).text()).toContain("[DONE]");
    expect(gw.state.metrics.hedges.get({ winner: "copy" }) ?? 0).toBe(0);
    // The worker that served the first prompt holds it (approximate mode): the same prompt goes there first again.
    slowWorker = fleet.calls()[0]!.worker;
    const other = slowWorker === "w1" ? "w2" : "w1";
    const text = await (await call("/v1/chat/completions", body(0))).text();
    const primary = fleet.calls().at(-2)!;
    expect(primary.worker).toBe(slowWorker);
    expect(text).toContain(`chatcmpl-${other}`);
    expect(text).toContain("[DONE]");
    expect(gw.state.metrics.hedges.get({ winner: "copy" })).toBe(1);
    await sleep(20);
    expect(gw.state.router.liveBookings).toBe(0);
    const copies = fleet.calls().filter((r) => r.headers.get("x-request-id")?.endsWith("-hedge"));
    expect(copies).toHaveLength(1);
    expect(copies[0]!.worker).toBe(other);
    expect(copies[0]!.signal.aborted).toBe(false);
    expect(primary.signal.aborted).toBe(true);
  }, 30_000);

  it("property: random slow, failing and cancelled streams never exceed the budget and leak no booking", async () => {
    const BUDGET = 0.1;
    const { gw, fleet, call } = await fakeGateway(4, ["--hedge-budget", String(BUDGET), "--hedge-min-samples", "5", "--hedge-quantile", "0.6", "--retries", "1"]);
    const rand = createPrng(20261202);
    const broken = new Set<string>();
    for (const w of ["w1", "w2", "w3", "w4"]) {
      fleet.scripts.set(w, (req) => {
        // The prompt says how this request behaves on its first worker; a hedge copy draws afresh.
        const content = String((req.body.messages as { content: string }[])[0]!.content);
        const copy = req.headers.get("x-request-id")!.endsWith("-hedge");
        const slow = !copy && content.includes("slow");
        // A failing worker answers 503 once (a broken stream would mark it dead: this fleet has no health probes).
        if (!copy && content.includes("fail") && !broken.has(content)) {
          broken.add(content);
          return Response.json({ error: { message: "overloaded" } }, { status: 503 });
        }
        return stream(req, slow ? 20 + randomInt(rand, 30) : 1 + randomInt(rand, 3), 1 + randomInt(rand, 4));
      });
    }
    const statuses: number[] = [];
    const inFlight: Promise<void>[] = [];
    for (let n = 0; n < 160; n++) {
      const ac = new AbortController();
      const cancelAt = rand() < 0.15 ? randomInt(rand, 30) : undefined;
      const kind = rand() < 0.3 ? "slow" : rand() < 0.1 ? "fail" : "ok";
      inFlight.push((async () => {
        const res = await call("/v1/chat/completions", { model: "m", stream: true, messages: [{ role: "user", content: `q${n % 23} ${kind} #${n}` }] }, { signal: ac.signal })
          .catch(() => undefined);
        statuses.push(res?.status ?? 0);
        if (cancelAt !== undefined) setTimeout(() => ac.abort(), cancelAt);
        await res?.text().catch(() => "");
      })());
      expect(gw.state.hedge.stats.hedges).toBeLessThanOrEqual(BUDGET * gw.state.hedge.stats.requests + 1e-9);
      if (n % 8 === 7) await Promise.all(inFlight.splice(0));
    }
    await Promise.all(inFlight);
    await sleep(50);
    const s = gw.state.hedge.stats;
    expect(statuses.filter((x) => x === 200).length).toBeGreaterThan(140);
    expect(s.requests).toBeGreaterThan(140);
    expect(s.hedges).toBeGreaterThan(0);
    expect(s.hedges).toBeLessThanOrEqual(BUDGET * s.requests);
    const hedgeMetric = (gw.state.metrics.hedges.get({ winner: "copy" }) ?? 0) + (gw.state.metrics.hedges.get({ winner: "primary" }) ?? 0);
    expect(hedgeMetric).toBe(s.hedges);
    expect(gw.state.router.liveBookings).toBe(0);
    for (const r of gw.state.router.snapshot().ranks) expect([r.activeRequests, r.activePrefillTokens, r.activeBlocks]).toEqual([0, 0, 0]);
  }, 60_000);
});
