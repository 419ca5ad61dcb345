/**
 * @module The ZeroMQ paths of the events benchmark. The engine publishes from a worker thread (its CPU is the
 * engine's, not the router's). Three ways to receive the same frames:
 * - "drain": frames are queued in the router's SUB socket first, then received, decoded and applied: the router's
 *   own cost per block op, the figure comparable to the core's raw apply rate;
 * - "stream": the production ZmqKvEventSubscriber while the engine publishes: end-to-end throughput on this
 *   machine, where the engine thread, ZeroMQ's I/O threads and the router share the cores;
 * - "sink": drained frames received and dropped: the transport floor.
 */
import { once } from "node:events";
import { Worker } from "node:worker_threads";
import type { KvIndex } from "../src/core/kv-index.ts";
import { KvEventStream } from "../src/events/kv-event-stream.ts";
import { nativeSockets } from "../src/runtime/zmq-native.ts";
import { ZmqKvEventSubscriber } from "../src/runtime/zmq-subscriber.ts";
import { now } from "./harness.ts";

export type ZmqMode = "drain" | "stream" | "sink";

interface Publisher {
  worker: Worker;
  endpoint: string;
  subscribed: Promise<unknown>;
}

async function startPublisher(payloads: Uint8Array[]): Promise<Publisher> {
  const worker = new Worker(new URL("./events-publisher.mjs", import.meta.url), { workerData: { payloads, topic: "" } });
  const [msg] = (await once(worker, "message")) as [{ endpoint: string }];
  return { worker, endpoint: msg.endpoint, subscribed: once(worker, "message") };
}

/**
 * Lets the worker close its socket and exit on its own: terminating it while zeromq's context is still open aborts
 * the whole process now and then ("terminate called after throwing an instance of 'Napi::Error'").
 */
async function stopPublisher(pub: Publisher): Promise<void> {
  const exited = once(pub.worker, "exit");
  pub.worker.postMessage("close");
  const timeout = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 5_000).unref());
  if ((await Promise.race([exited, timeout])) === "timeout") await pub.worker.terminate();
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The router side of one measurement: how far it got, and (drain, sink) a gate that lets frames queue first. */
interface Receiver {
  last(): number;
  hold(): void;
  go(): void;
  stream?: KvEventStream;
  close(): Promise<void>;
}

/**
 * The same loop as ZmqKvEventSubscriber's, on the gateway's SUB socket (zmq-native.ts), which the benchmark can hold
 * while frames queue up.
 */
function gatedReceiver(endpoint: string, stream: KvEventStream | undefined): Receiver {
  const sock = nativeSockets.subscriber({ receiveHighWaterMark: 10_000_000 });
  sock.subscribe("");
  sock.connect(endpoint);
  let n = -1;
  let gate: Promise<void> | undefined;
  let open = (): void => {};
  const loop = (async () => {
    for await (const frames of sock) {
      if (gate) await gate;
      if (stream) stream.onMessage(frames);
      n++;
    }
  })().catch(() => undefined);
  return {
    stream,
    last: () => (stream ? stream.lastSeq : n),
    hold: () => { gate = new Promise((r) => { open = () => { gate = undefined; r(); }; }); },
    go: () => open(),
    close: async () => { sock.close(); await loop; },
  };
}

async function subscriberReceiver(index: KvIndex, worker: string, endpoint: string, coreDecode: boolean): Promise<Receiver> {
  const sub = new ZmqKvEventSubscriber(index);
  const [stream] = await sub.attach({ worker, endpoint, blockSize: 16, coreDecode });
  return { stream, last: () => stream!.lastSeq, hold: () => {}, go: () => {}, close: () => sub.close({ keepEntries: true }) };
}

/**
 * ns per block op for each of `runs` runs of about `messages` messages (whole workload cycles), after one warm-up
 * run. `index` receives the events under `worker` (not used by "sink"); each cycle leaves the worker empty.
 */
export async function zmqRuns(mode: ZmqMode, payloads: Uint8Array[], blockOpsPerCycle: number, index: KvIndex, worker: string,
  runs: number, messages: number, coreDecode = true): Promise<number[]> {
  const pub = await startPublisher(payloads);
  const cycles = Math.max(1, Math.round(messages / payloads.length));
  const rx = mode === "stream" ? await subscriberReceiver(index, worker, pub.endpoint, coreDecode)
    : gatedReceiver(pub.endpoint, mode === "drain" ? new KvEventStream(index, { worker, blockSize: 16, coreDecode }) : undefined);
  await pub.subscribed;
  let seq = 0;
  const runOnce = async (): Promise<number> => {
    const target = seq + cycles * payloads.length - 1;
    rx.hold();
    let t0 = now();
    pub.worker.postMessage({ cycles, seq });
    seq = target + 1;
    if (mode !== "stream") {
      await once(pub.worker, "message"); // "sent": the frames are on their way into the SUB queue
      await sleep(300);
      t0 = now();
      rx.go();
    }
    while (rx.last() < target) await tick();
    return ((now() - t0) * 1e6) / (cycles * blockOpsPerCycle);
  };
  await runOnce();
  const out: number[] = [];
  for (let i = 0; i < runs; i++) out.push(await runOnce());
  const c = rx.stream?.counters;
  if (c && (c.corruptFrames + c.gaps + c.staleBatches + c.applyErrors > 0 || index.treeSize(worker) !== 0)) {
    throw new Error(`ZeroMQ ${mode} run lost or reordered batches: ${JSON.stringify(c)}`);
  }
  await rx.close();
  await stopPublisher(pub);
  return out;
}
