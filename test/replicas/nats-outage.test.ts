/**
 * Acceptance 3 of issue 14: nats-server stops mid-replay and comes back on the same port and store. No replica stops
 * routing (every request completes, /ready answers throughout), the replicas' indexes drift apart while it is down,
 * and once it is back their divergence returns to 0. A replica that does not share (no catch-up) stays divergent,
 * so the figure can fail.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { runThroughGateways } from "../../src/replay/gateway-run.ts";
import { performanceWallClock } from "../../src/replay/schedule.ts";
import { indexDivergence } from "../../src/replicas/index-divergence.ts";
import { realClock } from "../../src/sim/sim-clock.ts";
import { freePort } from "../conformance/processes.ts";
import { NatsServer, natsServerPath } from "./nats-server.ts";
import { ADMIN_TOKEN, conversations, digestOf, metric, startReplica, type ReplicaProc } from "./replica-procs.ts";

const MODEL = "kvgate-sim";

async function divergence(a: ReplicaProc, b: ReplicaProc): Promise<number> {
  return indexDivergence([await digestOf(a.url), await digestOf(b.url)]).divergence;
}

describe.skipIf(natsServerPath === undefined)("replicas through a NATS outage", () => {
  let nats: NatsServer;
  const sims: SimServer[] = [];
  const replicas: ReplicaProc[] = [];

  beforeAll(async () => {
    nats = await NatsServer.start();
    const ports = [await freePort(), await freePort(), await freePort()];
    const gw = ports.map((p) => `http://127.0.0.1:${p}`);
    // Engine i tells replica i only (engine 2 tells the replica that shares nothing).
    for (let i = 0; i < 3; i++) {
      sims.push(await startSimServer({
        clock: realClock(), speedupRatio: 20, numGpuBlocks: 4096, maxModelLen: 8192, workerId: `w${i}`,
        events: { url: `${gw[i]}/admin/kv-events`, token: ADMIN_TOKEN, flushIntervalMs: 5 },
      }));
    }
    const workers = sims.map((s, i) => ({ id: `w${i}`, url: s.url }));
    for (let i = 0; i < 3; i++) {
      replicas.push(await startReplica({
        id: `r${i}`, port: ports[i], workers, model: MODEL, blockSize: 16, nats: nats.url, heartbeatMs: 200, sharing: i === 2 ? "off" : "on",
      }));
    }
  }, 120_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await Promise.all(sims.map((s) => s.close()));
    await nats?.dispose();
  });

  it("keeps routing while NATS is down and agrees again (divergence 0) once it is back; without sharing it does not", async () => {
    const [r0, r1, off] = replicas as [ReplicaProc, ReplicaProc, ReplicaProc];
    const requests = conversations({ conversations: 6, turns: 8, gapMs: 60, systemTokens: 256, turnTokens: 96, outputTokens: 8 });
    let downAt = -1, upAt = -1;
    const outage: Promise<void>[] = [];
    const readyDuringOutage: number[] = [];
    const run = await runThroughGateways({
      policy: "kv_events", gateways: [r0.url, r1.url, off.url], requests, model: MODEL, traceSpeedup: 1, engineSpeedup: 1,
      host: { wall: performanceWallClock, fetch: globalThis.fetch.bind(globalThis) },
      onSent: (i) => {
        if (i === 12) outage.push(nats.stop().then(() => void (downAt = performance.now())));
        if (i === 30) {
          outage.push((async () => {
            for (const r of replicas) readyDuringOutage.push((await fetch(`${r.url}/ready`)).status);
            // While NATS is down each sharing replica knows only its own engine's newest blocks.
            expect(await divergence(r0, r1)).toBeGreaterThan(0);
            await nats.restart();
            upAt = performance.now();
          })());
        }
      },
    });
    await Promise.all(outage);
    expect(downAt).toBeGreaterThan(0);
    expect(upAt).toBeGreaterThan(downAt);
    expect(readyDuringOutage).toEqual([200, 200, 200]);
    // No replica stopped routing: every request, before, during and after the outage, completed.
    expect(run.records.filter((r) => r.error).map((r) => r.error)).toEqual([]);
    expect(run.records).toHaveLength(requests.length);
    // Once NATS is back the replicas reconnect, flush what they held and read the stream from where they were.
    const end = Date.now() + 30_000;
    let d = await divergence(r0, r1);
    while (d !== 0 && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 100));
      d = await divergence(r0, r1);
    }
    expect(d).toBe(0);
    expect(await metric(r0.url, "kvgate_sync_connected")).toBe(1);
    // Caught up: nothing of the stream left unread, and the last batch read has an age.
    for (const r of [r0, r1]) {
      expect(await metric(r.url, "kvgate_sync_events_behind")).toBe(0);
      expect(await metric(r.url, "kvgate_sync_lag_seconds")).toBeGreaterThanOrEqual(0);
    }
    const [a, b] = [await digestOf(r0.url), await digestOf(r1.url)];
    expect(a.total_blocks).toBeGreaterThan(0);
    // (KV-aware routing may keep every conversation on one engine, so which workers hold blocks is not fixed.)
    expect(a.ranks.filter((x) => x.blocks > 0).every((x) => x.worker === "w0" || x.worker === "w1")).toBe(true);
    expect(b.total_blocks).toBe(a.total_blocks);
    // The replica that shares nothing never heard of w0's and w1's blocks: it disagrees with both.
    expect(await divergence(r0, off)).toBeGreaterThan(0);
  }, 90_000);
});
