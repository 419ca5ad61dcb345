import { describe, it, expect } from "vitest";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { HttpPushSink } from "../../src/sim/http-push-sink.ts";
import { decodeKvEventBatch } from "../../src/events/kv-event-decode.ts";
import { blockRemoved, blockStored, type KvCacheEvent } from "../../src/sim/kv-events.ts";
import { VirtualClock } from "../../src/sim/sim-clock.ts";
import { startSimServer } from "../../src/adapter/node/sim-server.ts";

interface Sent {
  url: string;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** A fetch that records requests and answers from `script` (a status, or "down" for a network error). */
function fakeFetch(script: () => number | "down") {
  const sent: Sent[] = [];
  const fn = (async (url: string, init: RequestInit) => {
    const outcome = script();
    if (outcome === "down") throw new TypeError("fetch failed");
    sent.push({ url, headers: init.headers as Record<string, string>, body: init.body as Uint8Array });
    return new Response(null, { status: outcome });
  }) as unknown as typeof fetch;
  return { sent, fn };
}

const settle = () => new Promise((r) => setTimeout(r, 0));
const ev = (n: number): KvCacheEvent => blockRemoved([BigInt(n)]);
const seqOf = (s: Sent) => Number(s.headers["x-kvgate-seq"]);

describe("HttpPushSink batching", () => {
  it("should coalesce steps until the flush interval and POST one msgpack batch with the publisher headers", async () => {
    const clock = new VirtualClock();
    const { sent, fn } = fakeFetch(() => 200);
    const sink = new HttpPushSink({ url: "http://router/kv", workerId: "w-1", dpRank: 2, token: "s3cret", fetch: fn, clock, flushIntervalMs: 10 });
    sink.publish([blockStored(null, [1n, 2n], Array.from({ length: 32 }, (_, i) => i), 16)], 100.5);
    clock.advance(5);
    sink.publish([ev(1)], 100.25 + 0.5);
    await settle();
    expect(sent).toHaveLength(0);
    clock.advance(5);
    await settle();
    expect(sent).toHaveLength(1);
    expect(sent[0]!.url).toBe("http://router/kv");
    expect(sent[0]!.headers).toEqual({ "content-type": "application/msgpack", "x-kvgate-worker": "w-1", "x-kvgate-dp-rank": "2", "x-kvgate-seq": "0", authorization: "Bearer s3cret" });
    const batch = decodeKvEventBatch(sent[0]!.body);
    expect(batch.data_parallel_rank).toBe(2);
    expect(batch.ts).toBe(100.75);
    expect(batch.events.map((e) => e.type)).toEqual(["BlockStored", "BlockRemoved"]);
    expect(sink.stats).toMatchObject({ sent: 1, sentEvents: 2, queued: 0, nextSeq: 1 });
  });

  it("should seal a batch as soon as it holds maxBatchEvents, numbering batches 0, 1, 2", async () => {
    const clock = new VirtualClock();
    const { sent, fn } = fakeFetch(() => 204);
    const sink = new HttpPushSink({ url: "http://r", workerId: "w", fetch: fn, clock, maxBatchEvents: 3 });
    for (let i = 0; i < 7; i++) sink.publish([ev(i)], 1);
    for (let i = 0; i < 5; i++) await settle();
    expect(sent.map(seqOf)).toEqual([0, 1]);
    expect(sent.map((s) => decodeKvEventBatch(s.body).events.length)).toEqual([3, 3]);
    expect(await sink.flush()).toBe(true);
    expect(sent.map(seqOf)).toEqual([0, 1, 2]);
    expect(sent.map((s) => s.headers.authorization)).toEqual([undefined, undefined, undefined]);
  });
});

describe("HttpPushSink when the router is unreachable", () => {
  it("should retry with backoff, drop the oldest batches beyond the queue bound, and leave a visible seq gap", async () => {
    const clock = new VirtualClock();
    let down = true;
    const errors: string[] = [];
    const { sent, fn } = fakeFetch(() => (down ? "down" : 200));
    const sink = new HttpPushSink({ url: "http://r", workerId: "w", fetch: fn, clock, maxBatchEvents: 1, maxQueueBatches: 3, retryDelayMs: 100, onError: (e) => errors.push(e.message) });
    for (let i = 0; i < 6; i++) {
      sink.publish([ev(i)], 1);
      await settle();
    }
    expect(sink.stats.failures).toBe(1);
    expect(sink.stats.dropped).toBe(3);
    expect(sink.stats.droppedEvents).toBe(3);
    expect(sink.stats.queued).toBe(3);
    clock.advance(100);
    await settle();
    expect(sink.stats.failures).toBe(2); // retried after 100 ms, then backs off to 200 ms
    down = false;
    clock.advance(199);
    await settle();
    expect(sent).toHaveLength(0);
    clock.advance(1);
    for (let i = 0; i < 5; i++) await settle();
    // The queue kept the newest three; 0..2 were dropped, so the receiver's first seq is 3.
    expect(sent.map(seqOf)).toEqual([3, 4, 5]);
    expect(sink.stats).toMatchObject({ sent: 3, queued: 0 });
    expect(errors.every((m) => m.includes("fetch failed"))).toBe(true);
  });

  it("should not retry a batch the router refuses with a 4xx, and should count it", async () => {
    const clock = new VirtualClock();
    const answers = [400, 200];
    const { sent, fn } = fakeFetch(() => answers.shift() ?? 200);
    const sink = new HttpPushSink({ url: "http://r", workerId: "w", fetch: fn, clock, maxBatchEvents: 1 });
    sink.publish([ev(1)], 1);
    sink.publish([ev(2)], 1);
    expect(await sink.flush()).toBe(true);
    expect(sent.map(seqOf)).toEqual([0, 1]);
    expect(sink.stats).toMatchObject({ sent: 1, rejected: 1 });
  });

  it("should report false from flush and count what close drops while the router stays down", async () => {
    const clock = new VirtualClock();
    const { fn } = fakeFetch(() => "down");
    const sink = new HttpPushSink({ url: "http://r", workerId: "w", fetch: fn, clock });
    sink.publish([ev(1), ev(2)], 1);
    expect(await sink.flush()).toBe(false);
    await sink.close();
    sink.publish([ev(3)], 1);
    expect(sink.stats).toMatchObject({ sent: 0, dropped: 1, droppedEvents: 3, queued: 0 });
  });
});

describe("HttpPushSink against a real HTTP receiver", () => {
  it("should deliver a simulated engine's events so that replaying them reproduces its cache", async () => {
    const got: { headers: IncomingMessage["headers"]; body: Buffer }[] = [];
    const receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        got.push({ headers: req.headers, body: Buffer.concat(chunks) });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/kv-events`;
    const sim = await startSimServer({ workerId: "sim-a", numGpuBlocks: 24, speedupRatio: 100, events: { url, token: "t0k", flushIntervalMs: 2, encoding: "map" } });
    try {
      const system = "Shared system prompt for every request in this test. ".repeat(6);
      for (let i = 0; i < 8; i++) {
        const res = await fetch(sim.url + "/v1/chat/completions", {
          method: "POST", headers: { "content-type": "application/json" },
          body: JSON.stringify({ messages: [{ role: "system", content: system }, { role: "user", content: `question ${i} `.repeat(10 + i) }], max_tokens: 20 }),
        });
        expect(res.status).toBe(200);
        await res.json();
      }
    } finally {
      await sim.close();
      await new Promise((r) => receiver.close(r));
    }
    expect(got.length).toBeGreaterThan(0);
    const mirror = new Set<bigint>();
    got.forEach((g, i) => {
      expect(g.headers).toMatchObject({ "content-type": "application/msgpack", "x-kvgate-worker": "sim-a", "x-kvgate-dp-rank": "0", "x-kvgate-seq": String(i), authorization: "Bearer t0k" });
      for (const e of decodeKvEventBatch(new Uint8Array(g.body)).events) {
        if (e.type === "BlockStored") e.block_hashes.forEach((h) => mirror.add(h));
        else if (e.type === "BlockRemoved") e.block_hashes.forEach((h) => expect(mirror.delete(h)).toBe(true));
        else mirror.clear();
      }
    });
    expect(sim.engine.cache.stats.evicted).toBeGreaterThan(0);
    expect(mirror).toEqual(sim.engine.cache.cachedHashes());
  });
});
