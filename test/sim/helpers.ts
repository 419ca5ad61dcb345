/** @module Fixtures for the simulated-engine tests: engines on a virtual clock with the WASM hasher, prompts, runs. */
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import type { KvIndex } from "../../src/core/kv-index.ts";
import { wasmBlockHasher } from "../../src/sim/block-hasher.ts";
import { callbackSink, type EncodedKvBatch } from "../../src/sim/kv-event-sink.ts";
import type { KvEventEncoding } from "../../src/sim/kv-event-codec.ts";
import { VirtualClock } from "../../src/sim/sim-clock.ts";
import { SimEngine, type SimHandle, type SimResult } from "../../src/sim/sim-engine.ts";
import type { SimEngineOptions } from "../../src/sim/sim-options.ts";

let shared: Promise<KvIndex> | undefined;

/** One hashing index for every engine of a test file (hashing is stateless). */
export function hashIndex(): Promise<KvIndex> {
  shared ??= createKvIndex({ capacity: 1024, maxSlots: 1, salt: 1n });
  return shared;
}

export interface SimFixture {
  engine: SimEngine;
  clock: VirtualClock;
  batches: EncodedKvBatch[];
  metrics: () => ReturnType<SimEngine["metrics"]["counts"]>;
}

export async function simFixture(options: SimEngineOptions = {}, encoding: KvEventEncoding = "array"): Promise<SimFixture> {
  const clock = new VirtualClock();
  const batches: EncodedKvBatch[] = [];
  const o = { blockSize: 16, ...options };
  const sink = callbackSink({ workerId: o.workerId ?? "sim-0", dpRank: o.dpRank ?? 0, encoding }, (b) => batches.push(b));
  const engine = new SimEngine(o, { hasher: wasmBlockHasher(await hashIndex(), o.blockSize), clock, sinks: [sink] });
  return { engine, clock, batches, metrics: () => engine.metrics.counts() };
}

/** `n` token ids starting at `from` (distinct ranges never share blocks). */
export function range(from: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => from + i);
}

/** Runs the clock until the engine has nothing left and returns the results of `handles`. */
export async function drain(f: SimFixture, handles: SimHandle[]): Promise<SimResult[]> {
  f.clock.runUntilIdle();
  return Promise.all(handles.map((h) => h.result));
}
