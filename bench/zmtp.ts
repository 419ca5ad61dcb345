/**
 * @module kvgate's ZMTP client against the native `zeromq` module (libzmq) on Node, same run, same engine thread:
 * how long the router takes to take in the events benchmark's vLLM batches while a libzmq XPUB in a worker thread
 * publishes them as fast as it can. Two paths per transport: "sink" (messages received and dropped: the transport)
 * and "stream" (ZmqKvEventSubscriber decoding and applying them to an index: what a gateway does). Runs alternate
 * between the transports so machine noise spreads over both; the result is the median ratio ZMTP ÷ native.
 * `npm run bench -- zmtp [--runs N] [--cycles N]`.
 */
import { once } from "node:events";
import { loadavg } from "node:os";
import { Worker } from "node:worker_threads";
import { createKvIndex } from "../src/core/create-kv-index.ts";
import type { KvIndex } from "../src/core/kv-index.ts";
import { ZmqKvEventSubscriber } from "../src/zmq/kv-event-subscriber.ts";
import type { ZmqSockets } from "../src/zmq/zmq-sockets.ts";
import { loadNativeSockets } from "../src/adapter/node/zmq-transport.ts";
import { zmtpSockets } from "../src/zmq/zmtp-sockets.ts";
import { buildWorkload } from "./events-workload.ts";
import { now, percentile, writeResults } from "./harness.ts";
import { nodeTcpDialer } from "../src/adapter/node/tcp-dialer.ts";

type Path = "sink" | "stream";

interface Run {
  transport: string;
  path: Path;
  msPerCycle: number;
}

async function startPublisher(payloads: Uint8Array[]): Promise<{ worker: Worker; endpoint: string; subscribed: Promise<unknown> }> {
  const worker = new Worker(new URL("./events-publisher.mjs", import.meta.url), { workerData: { payloads, topic: "" } });
  const [msg] = (await once(worker, "message")) as [{ endpoint: string }];
  return { worker, endpoint: msg.endpoint, subscribed: once(worker, "message") };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** One transport and path: a fresh publisher, one warm-up cycle, then `runs` timed publish-and-receive passes. */
async function measurePath(sockets: ZmqSockets, path: Path, payloads: Uint8Array[], index: KvIndex, cycles: number, runs: number): Promise<number[]> {
  const pub = await startPublisher(payloads);
  let received = -1;
  let close: () => Promise<void>;
  let last: () => number;
  if (path === "sink") {
    const sock = sockets.subscriber({ receiveHighWaterMark: 100_000 });
    sock.subscribe("");
    sock.connect(pub.endpoint);
    const loop = (async () => {
      for await (const _ of sock) received++;
    })().catch(() => undefined);
    last = () => received;
    close = async () => {
      sock.close();
      await loop;
    };
  } else {
    const sub = new ZmqKvEventSubscriber(index, { sockets });
    const [stream] = await sub.attach({ worker: `w-${sockets.name}`, endpoint: pub.endpoint, blockSize: 16 });
    last = () => stream!.lastSeq;
    close = () => sub.close();
  }
  await pub.subscribed;
  let seq = 0;
  const once_ = async (): Promise<number> => {
    const target = seq + cycles * payloads.length - 1;
    const t0 = now();
    pub.worker.postMessage({ cycles, seq });
    seq = target + 1;
    while (last() < target) await tick();
    return (now() - t0) / cycles;
  };
  await once_();
  const out: number[] = [];
  for (let i = 0; i < runs; i++) out.push(await once_());
  await close();
  // Let the worker close its socket and exit by itself: terminating it with zeromq's context open can abort the process.
  const exited = once(pub.worker, "exit");
  pub.worker.postMessage("close");
  const timeout = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 5_000).unref());
  if ((await Promise.race([exited, timeout])) === "timeout") await pub.worker.terminate();
  return out;
}

export async function main(argv: string[]): Promise<void> {
  const arg = (name: string, d: number): number => {
    const i = argv.indexOf(name);
    return i >= 0 ? Number(argv[i + 1]) : d;
  };
  const runs = arg("--runs", 5), cycles = arg("--cycles", 4), rounds = arg("--rounds", 3);
  const started = now();
  const load0 = loadavg().map((x) => x.toFixed(2)).join(" ");
  const w = buildWorkload({ seed: 6, blocksPerBatch: 128, capacityBlocks: 8192, batches: 400, blockSize: 16 });
  const payloads = w.payloads.array;
  const bytes = payloads.reduce((s, p) => s + p.length, 0);
  console.log(`kvgate ZMTP vs native zeromq — ${payloads.length} vLLM batches per cycle (${(bytes / 1024).toFixed(0)} KiB, ${w.stats.blockOps} block ops), ` +
    `${cycles} cycles per run, ${runs} runs per round, ${rounds} rounds`);
  const transports = { native: await loadNativeSockets(), zmtp: zmtpSockets(nodeTcpDialer) };
  const index = await createKvIndex({ maxSlots: 8, capacity: 1 << 16 });
  const all: Run[] = [];
  for (let r = 0; r < rounds; r++) {
    for (const path of ["sink", "stream"] as const) {
      for (const [name, sockets] of r % 2 === 0 ? Object.entries(transports) : Object.entries(transports).reverse()) {
        for (const ms of await measurePath(sockets, path, payloads, index, cycles, runs)) all.push({ transport: name, path, msPerCycle: ms });
      }
    }
  }
  const median = (t: string, p: Path): number => percentile(all.filter((x) => x.transport === t && x.path === p).map((x) => x.msPerCycle), 50);
  const summary: Record<string, { nativeMs: number; zmtpMs: number; zmtpOverNative: number; zmtpMBps: number; nativeMBps: number }> = {};
  for (const path of ["sink", "stream"] as const) {
    const n = median("native", path), z = median("zmtp", path);
    summary[path] = { nativeMs: n, zmtpMs: z, zmtpOverNative: z / n, nativeMBps: bytes / 1e3 / n, zmtpMBps: bytes / 1e3 / z };
    console.log(`  ${path.padEnd(6)} native ${n.toFixed(1)} ms/cycle (${(bytes / 1e3 / n).toFixed(0)} MB/s), ` +
      `zmtp ${z.toFixed(1)} ms/cycle (${(bytes / 1e3 / z).toFixed(0)} MB/s): zmtp takes ${(z / n).toFixed(2)}× native's time`);
  }
  const load1 = loadavg().map((x) => x.toFixed(2)).join(" ");
  console.log(`load average ${load0} → ${load1}; ${((now() - started) / 1e3).toFixed(1)} s`);
  console.log(`results: ${writeResults("zmtp", { runs, cycles, rounds, payloads: payloads.length, bytesPerCycle: bytes, summary, all, loadAverage: { start: load0, end: load1 } })}`);
}
