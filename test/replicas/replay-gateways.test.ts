/**
 * `kvgate replay --gateway` over real replica processes sharing state through a real nats-server: requests go
 * round-robin over the gateways (one URL that refuses connections is skipped without failing any request), and the
 * report carries the engines' reported hit rate overall and per gateway.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { runReplayCommand } from "../../src/replay/replay-command.ts";
import type { ReplayResults } from "../../src/replay/replay-results.ts";
import { realClock } from "../../src/sim/sim-clock.ts";
import { freePort } from "../conformance/processes.ts";
import { capturingHost, chatTrace } from "../replay/helpers.ts";
import { NatsServer, natsServerPath } from "./nats-server.ts";
import { ADMIN_TOKEN, startReplica, type ReplicaProc } from "./replica-procs.ts";

const MODEL = "kvgate-sim";
const SPEEDUP = 20;

async function requestsServed(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith("kvgate_requests_total{") && l.includes("/v1/completions") && l.includes('code="200"'))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
}

describe.skipIf(natsServerPath === undefined)("kvgate replay --gateway over two replicas", () => {
  let nats: NatsServer;
  const sims: SimServer[] = [];
  const replicas: ReplicaProc[] = [];

  beforeAll(async () => {
    nats = await NatsServer.start();
    const ports = [await freePort(), await freePort()];
    const gw = ports.map((p) => `http://127.0.0.1:${p}`);
    // Engine i pushes its KV events to replica i only; the replicas share them over NATS.
    for (let i = 0; i < 2; i++) {
      sims.push(await startSimServer({
        clock: realClock(), speedupRatio: SPEEDUP, numGpuBlocks: 2048, maxModelLen: 8192, workerId: `w${i}`,
        events: { url: `${gw[i]}/admin/kv-events`, token: ADMIN_TOKEN, flushIntervalMs: 5 },
      }));
    }
    const workers = sims.map((s, i) => ({ id: `w${i}`, url: s.url }));
    for (let i = 0; i < 2; i++) {
      replicas.push(await startReplica({ id: `r${i}`, port: ports[i], workers, model: MODEL, blockSize: 16, nats: nats.url, heartbeatMs: 200 }));
    }
  }, 120_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await Promise.all(sims.map((s) => s.close()));
    await nats?.dispose();
  });

  it("spreads requests round-robin, skips a gateway that refuses connections, and reports engine hit rates", async () => {
    const host = capturingHost();
    const trace = join(host.dir, "chat.jsonl");
    writeFileSync(trace, chatTrace());
    const dead = `http://127.0.0.1:${await freePort()}`;
    const urls = [replicas[0]!.url, dead, replicas[1]!.url];
    const before = await Promise.all(replicas.map((r) => requestsServed(r.url)));
    const code = await runReplayCommand([
      "--trace", trace, "--gateway", `${urls[0]},${urls[1]}`, "--gateway", urls[2]!, "--workers", "2", "--block-size", "16",
      "--num-gpu-blocks", "2048", "--sim-speedup", String(SPEEDUP), "--out", join(host.dir, "report"), "--no-progress",
    ], host);
    expect(code).toBe(0);
    const doc = JSON.parse(host.read("report.json")) as ReplayResults;
    expect(doc.fleet.gateways).toEqual(urls);
    const p = doc.policies[0]!;
    expect(p.policy).toBe("kv_events");
    expect(p.summary).toMatchObject({ requests: 12, completed: 12, errors: 0 });
    // In send order the live gateways alternate; the dead one never served a request.
    const order = p.requests.map((r) => r.gateway);
    expect(order).toEqual(order.map((_, i) => urls[i % 2 === 0 ? 0 : 2]));
    const served = (await Promise.all(replicas.map((r) => requestsServed(r.url)))).map((n, i) => n - before[i]!);
    expect(served).toEqual([6, 6]);
    expect(p.gateways!.map((g) => [g.url, g.requests, g.errors])).toEqual([[urls[0], 6, 0], [dead, 0, 0], [urls[2], 6, 0]]);
    expect(p.log.join("\n")).toMatch(/refused \d+ connections/);
    // Engine-reported cache hits: each conversation's later turns find their prefix, whichever replica routed them,
    // because both replicas know both engines' blocks (each engine tells only one of them).
    expect(p.summary.hitRate).toBeGreaterThan(0.5);
    for (const g of [p.gateways![0]!, p.gateways![2]!]) expect(g.hitRate).toBeGreaterThan(0.4);
    expect(Math.abs(p.predictedHitRate - p.summary.hitRate)).toBeLessThan(0.05);
    const table = host.out.join("");
    expect(host.err.join("")).toContain("through 3 running gateways (round-robin)");
    expect(p.label).toBe("kv with events via 3 gateways");
    expect(table).toContain(dead);
    expect(host.read("report.html")).toContain('data-table="gateways"');
  }, 90_000);
});
