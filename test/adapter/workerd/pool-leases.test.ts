/**
 * @module Stream leases on the Workers pool path: a relayed stream whose client stops pulling (as when workerd drops
 * a gone client without cancelling the body) has its plan cancelled by the next request's sweep, through that
 * request's pool client; a stream that is read, or ends, keeps its plan or reports as usual, and a slow client that
 * reads again still gets the rest of its stream.
 */
import { describe, expect, it } from "vitest";
import { PoolClient, type PoolStub } from "../../../src/adapter/workerd/pool-client.ts";
import { PoolLeases } from "../../../src/adapter/workerd/pool-leases.ts";
import { relayStream } from "../../../src/adapter/workerd/pool-relay.ts";
import type { ExecutionContext } from "../../../src/adapter/workerd/env-boot.ts";

const enc = new TextEncoder();
const chunk = (content: string): string => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\n\n`;

/** A pool stub recording each report's path, and a context whose waitUntil promises the test can await. */
function pool(): { client: PoolClient; paths: string[]; ctx: ExecutionContext; settled: () => Promise<unknown> } {
  const paths: string[] = [];
  const stub: PoolStub = {
    fetch: async (req) => {
      paths.push(new URL(req.url).pathname);
      return new Response("{}", { status: 200 });
    },
  };
  const waits: Promise<unknown>[] = [];
  const ctx: ExecutionContext = { waitUntil: (p) => void waits.push(p), passThroughOnException: () => {} };
  return { client: new PoolClient(stub, undefined), paths, ctx, settled: () => Promise.all(waits) };
}

/** An engine stream the test feeds chunk by chunk. */
function engine(): { res: Response; push: (s: string) => void; end: () => void } {
  let ctl!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({ start: (c) => void (ctl = c) });
  return {
    res: new Response(body, { headers: { "content-type": "text/event-stream" } }),
    push: (s) => ctl.enqueue(enc.encode(s)),
    end: () => ctl.close(),
  };
}

const flush = (): Promise<void> => new Promise((r) => setTimeout(r, 0));

/** Plan `planId`'s engine stream relayed under `leases`, reporting through a pool of its own. */
function relayed(leases: PoolLeases, planId: string) {
  const streamer = pool();
  const e = engine();
  const res = relayStream({ res: e.res, abort: new AbortController() }, new AbortController().signal, false,
    streamer.client.reporter(planId, streamer.ctx), {}, 0, { leases, planId });
  return { streamer, e, reader: res.body!.getReader() };
}

describe("pool stream leases", () => {
  it("should cancel the plan of a stream nobody pulls from for the lease, once, through the sweeping request", async () => {
    let t = 0;
    const leases = new PoolLeases(10_000, 120_000, () => t);
    const { streamer, e, reader } = relayed(leases, "kvp-1");
    e.push(chunk("a"));
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"a"');
    await flush();
    expect(streamer.paths).toEqual(["/v1/route/kvp-1/first_token"]);
    // The client is gone without a word: nothing pulls any more.
    const sweeper = pool();
    t = 9_999;
    expect(leases.sweep(sweeper.client, sweeper.ctx)).toBe(0);
    t = 10_000;
    expect(leases.sweep(sweeper.client, sweeper.ctx)).toBe(1);
    expect(leases.sweep(sweeper.client, sweeper.ctx)).toBe(0);
    await sweeper.settled();
    expect(sweeper.paths).toEqual(["/v1/route/kvp-1/cancel"]);
    expect(leases.size).toBe(0);
    // A client that reads again still gets its stream, and nothing more is reported on the cancelled plan.
    e.push(chunk("b") + "data: [DONE]\n\n");
    e.end();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"b"');
    expect((await reader.read()).done).toBe(true);
    await flush();
    expect(streamer.paths).toEqual(["/v1/route/kvp-1/first_token"]);
  });

  it("should report nothing on a plan whose lease ran out before its first token, when the client reads after all", async () => {
    let t = 0;
    const leases = new PoolLeases(10_000, 120_000, () => t);
    const { streamer, e, reader } = relayed(leases, "kvp-9");
    const sweeper = pool();
    t = 10_000;
    expect(leases.sweep(sweeper.client, sweeper.ctx)).toBe(1);
    await sweeper.settled();
    expect(sweeper.paths).toEqual(["/v1/route/kvp-9/cancel"]);
    e.push(chunk("a") + "data: [DONE]\n\n");
    e.end();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"a"');
    expect((await reader.read()).done).toBe(true);
    await flush();
    expect(streamer.paths).toEqual([]);
  });

  it("should keep the plan of a stream whose pull waits on the engine, and close the lease when the stream completes", async () => {
    let t = 0;
    const leases = new PoolLeases(10_000, 120_000, () => t);
    const { streamer, e, reader } = relayed(leases, "kvp-2");
    const pending = reader.read();
    await flush();
    // Waiting on a slow engine is not an abandoned stream: the idle timeout bounds that wait.
    const sweeper = pool();
    t = 60_000;
    expect(leases.sweep(sweeper.client, sweeper.ctx)).toBe(0);
    e.push(chunk("a") + "data: [DONE]\n\n");
    e.end();
    await pending;
    expect((await reader.read()).done).toBe(true);
    await streamer.settled();
    expect(streamer.paths).toEqual(["/v1/route/kvp-2/first_token", "/v1/route/kvp-2/complete"]);
    expect(leases.size).toBe(0);
    t = 1_000_000;
    expect(leases.sweep(sweeper.client, sweeper.ctx)).toBe(0);
    expect(sweeper.paths).toEqual([]);
  });

  it("should hold no lease when leases are off", async () => {
    const leases = new PoolLeases(0, 120_000, () => 0);
    relayed(leases, "kvp-3");
    expect(leases.size).toBe(0);
  });
});
