/**
 * @module The ZeroMQ paths of the events benchmark, over either ZeroMQ implementation (kvgate's ZMTP client, the
 * gateway's on every runtime, or the native `zeromq` module). The engine publishes from a worker thread (its CPU is
 * the engine's, not the router's). Three ways to receive the same frames:
 * - "drain": the router's thread is blocked while the engine publishes a backlog, then receives, decodes and applies
 *   it: the router's own rate, the figure comparable to the core's raw apply rate. The backlog waits where each
 *   implementation leaves it: in libzmq's receive queue, filled by its I/O thread (native), or in TCP buffers and the
 *   publisher's queue, read on the router's thread (ZMTP: its socket reads are part of the figure);
 * - "stream": the production ZmqKvEventSubscriber while the engine publishes: end-to-end throughput on this
 *   machine, where the engine thread, ZeroMQ's I/O threads and the router share the cores;
 * - "sink": a drained backlog received and dropped: the transport floor.
 */
import { once } from "node:events";
import { Worker } from "node:worker_threads";
import type { KvIndex } from "../src/core/kv-index.ts";
import { KvEventStream } from "../src/events/kv-event-stream.ts";
import type { SubSocket, ZmqSockets } from "../src/zmq/zmq-sockets.ts";
import { ZmqKvEventSubscriber } from "../src/zmq/kv-event-subscriber.ts";
import { now } from "./harness.ts";
import * as hooks from "../test/support/kv-index-hooks.ts";

export type ZmqMode = "drain" | "stream" | "sink";

interface Publisher {
  worker: Worker;
  endpoint: string;
  subscribed: Promise<unknown>;
  /** Element 0 turns 1 once a publish order is sent. */
  sent: Int32Array;
}

async function startPublisher(payloads: Uint8Array[]): Promise<Publisher> {
  const sent = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(new URL("./events-publisher.mjs", import.meta.url), { workerData: { payloads, topic: "", sent } });
  const [msg] = (await once(worker, "message")) as [{ endpoint: string }];
  return { worker, endpoint: msg.endpoint, subscribed: once(worker, "message"), sent };
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

/**
 * Blocks this thread (no event loop turn, so nothing is received on it) until the publisher has sent the backlog. No
 * settling time after: an idle pause lets the host evict the index from the caches, and a router catching up on a
 * backlog has not been idle. What is still in transit then moves on the other core (libzmq's I/O threads).
 */
function blockWhilePublishing(pub: Publisher): void {
  Atomics.wait(pub.sent, 0, 0, 60_000);
  Atomics.store(pub.sent, 0, 0);
}

/** The router side of one measurement: how far it got. */
interface Receiver {
  last(): number;
  stream?: KvEventStream;
  close(): Promise<void>;
}

/** The loop of ZmqKvEventSubscriber (listener when the socket has one, else iteration) on a bare SUB socket. */
function bareReceiver(sockets: ZmqSockets, endpoint: string, stream: KvEventStream | undefined): Receiver {
  const sock: SubSocket = sockets.subscriber({ receiveHighWaterMark: 10_000_000 });
  sock.subscribe("");
  sock.connect(endpoint);
  let n = -1;
  const take = (frames: readonly Uint8Array[]): void => {
    if (stream) stream.onMessage(frames);
    n++;
  };
  const loop = sock.listen ? sock.listen(take) : (async () => {
    for await (const frames of sock) take(frames);
  })().catch(() => undefined);
  return {
    stream,
    last: () => (stream ? stream.lastSeq : n),
    close: async () => { sock.close(); await loop; },
  };
}

async function subscriberReceiver(sockets: ZmqSockets, index: KvIndex, worker: string, endpoint: string, coreDecode: boolean): Promise<Receiver> {
  const sub = new ZmqKvEventSubscriber(index, { sockets });
  const [stream] = await sub.attach({ worker, endpoint, blockSize: 16, coreDecode });
  return { stream, last: () => stream!.lastSeq, close: () => sub.close({ keepEntries: true }) };
}

/**
 * ns per block op for each of `runs` runs of about `messages` messages (whole workload cycles), after one warm-up
 * run. `index` receives the events under `worker` (not used by "sink"); each cycle leaves the worker empty.
 */
export async function zmqRuns(sockets: ZmqSockets, mode: ZmqMode, payloads: Uint8Array[], blockOpsPerCycle: number, index: KvIndex,
  worker: string, runs: number, messages: number, coreDecode = true): Promise<number[]> {
  const pub = await startPublisher(payloads);
  const cycles = Math.max(1, Math.round(messages / payloads.length));
  const rx = mode === "stream" ? await subscriberReceiver(sockets, index, worker, pub.endpoint, coreDecode)
    : bareReceiver(sockets, pub.endpoint, mode === "drain" ? new KvEventStream(index, { worker, blockSize: 16, coreDecode }) : undefined);
  await pub.subscribed;
  let seq = 0;
  const runOnce = async (): Promise<number> => {
    const target = seq + cycles * payloads.length - 1;
    const sent = once(pub.worker, "message");
    let t0 = now();
    pub.worker.postMessage({ cycles, seq });
    seq = target + 1;
    if (mode !== "stream") {
      blockWhilePublishing(pub);
      t0 = now();
    }
    while (rx.last() < target) await tick();
    const ns = ((now() - t0) * 1e6) / (cycles * blockOpsPerCycle);
    await sent;
    return ns;
  };
  await runOnce();
  const out: number[] = [];
  for (let i = 0; i < runs; i++) out.push(await runOnce());
  const c = rx.stream?.counters;
  if (c && (c.corruptFrames + c.gaps + c.staleBatches + c.applyErrors > 0 || hooks.treeSize(index, worker) !== 0)) {
    throw new Error(`ZeroMQ ${mode} run lost or reordered batches: ${JSON.stringify(c)}`);
  }
  await rx.close();
  await stopPublisher(pub);
  return out;
}
