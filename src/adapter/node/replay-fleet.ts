/**
 * @module Simulated fleets for `kvgate replay` on Node: in this thread (tests: simple and deterministic enough), or
 * in a worker thread so the engines get the second core while the client, router and HTTP front keep the first.
 * Either way the engines are real HTTP servers on loopback and their KV events reach the caller as vLLM msgpack
 * batches, in order per engine.
 */
import { Worker } from "node:worker_threads";
import { KvgateError } from "../../core/errors.ts";
import type { FleetSpec, RunningFleet } from "../../replay/replay-host.ts";
import { callbackSink, type EncodedKvBatch } from "../../sim/kv-event-sink.ts";
import { startSimServer, type SimServer } from "./sim-server.ts";

/** Engines in this thread; events are delivered synchronously at the end of each engine step. */
export async function startInProcessFleet(spec: FleetSpec): Promise<RunningFleet> {
  const sims: SimServer[] = [];
  try {
    for (const engine of spec.engines) {
      const id = engine.workerId ?? `sim-${sims.length}`;
      const sinks = spec.onBatch ? [callbackSink({ workerId: id, dpRank: engine.dpRank ?? 0 }, spec.onBatch)] : [];
      sims.push(await startSimServer({ ...engine, workerId: id, host: "127.0.0.1", port: 0, sinks }));
    }
  } catch (e) {
    await Promise.all(sims.map((s) => s.close()));
    throw e;
  }
  return { urls: sims.map((s) => s.url), close: async () => void (await Promise.all(sims.map((s) => s.close()))) };
}

/** Messages from the fleet worker (replay-fleet-worker.ts). */
export type FleetWorkerMessage =
  | { type: "ready"; urls: string[] }
  | { type: "batch"; batch: EncodedKvBatch }
  | { type: "error"; message: string }
  | { type: "closed" };

/** Engines in a worker thread; each batch crosses with its bytes transferred, not copied. */
export function startThreadFleet(spec: FleetSpec): Promise<RunningFleet> {
  const worker = new Worker(new URL("./replay-fleet-worker.mjs", import.meta.url), {
    workerData: { engines: spec.engines, events: spec.onBatch !== undefined },
  });
  let closed: Promise<void> | undefined;
  return new Promise((resolve, reject) => {
    const fail = (e: Error): void => {
      reject(e);
      void worker.terminate();
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new KvgateError("KVGATE_ERR_STATE", `the engine thread exited (code ${code}) before it was ready`)));
    worker.on("message", (m: FleetWorkerMessage) => {
      if (m.type === "batch") spec.onBatch?.(m.batch);
      else if (m.type === "error") fail(new KvgateError("KVGATE_ERR_STATE", `engine thread: ${m.message}`));
      else if (m.type === "ready") {
        resolve({
          urls: m.urls,
          close: () => (closed ??= new Promise<void>((done) => {
            worker.removeAllListeners("exit");
            worker.once("exit", () => done());
            worker.postMessage({ type: "close" });
          })),
        });
      }
    });
  });
}
