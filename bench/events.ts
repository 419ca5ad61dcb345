/**
 * @module `npm run bench -- events`: acceptance item 4 of issue 6. Engine KV-event batches (vLLM msgpack, both
 * encodings) decoded and applied to the index, in events/s and block-ops/s, against the core's raw apply rate
 * measured in the same run:
 *
 * (a) raw: `KvIndex.applyBatch` of the same batches pre-encoded by the core's EventBatchWriter (byte-equal to what
 *     the decoder produces; a run of BlockRemoved events is one record in both), so ratios isolate decoding;
 * (b) decode only: msgpack → binary records, nothing applied;
 * (c) decode + apply in process: `KvEventStream.onBatch` (sequence tracking included);
 * (d) ZeroMQ to index, router side, over the gateway's ZeroMQ client (kvgate's ZMTP client, every runtime): a backlog
 *     the engine published while the router's thread was blocked, then received, decoded, applied (the target);
 * (d′) the same over the native `zeromq` module (libzmq; its I/O thread has taken the backlog in beforehand);
 * (e) ZeroMQ end to end while the engine publishes from a worker thread (ZmqKvEventSubscriber; shares the cores);
 * (f) ZeroMQ transport alone: the drained frames received and dropped (ZMTP, and (f′) native).
 *
 * The index is the gateway's default (capacity 2^20, 64 slots) holding `--background` blocks of 15 other workers,
 * as a fleet router would; (a′)/(c′) repeat (a)/(c) on an index sized to this one worker (all in cache) for
 * sensitivity. Target: (d) and (e) ≥ 50% of (a), worse encoding each; each ZeroMQ group is divided by the raw rate
 * measured right before and right after it, and when those two differ by more than 15% (the host's load changed) its
 * verdict is UNRELIABLE rather than MET or MISSED. Nothing is asserted (shared, noisy machine);
 * ratios are printed and written to bench/results/events.json. Flags: --blocks-per-batch B (128), --capacity C engine
 * cache blocks (8192), --batches N (400), --background N (524288), --samples N (10), --zmq-runs N (5), --quick,
 * --decoder core|host (core: batches decoded in the WASM core; host: the TypeScript decoder only, for comparison).
 */
import { loadavg } from "node:os";
import { loadCoreModule } from "../src/wasm/module-fs.ts";
import { KvIndex } from "../src/core/kv-index.ts";
import { EventBatchWriter } from "../src/core/event-encoder.ts";
import { seededRandom } from "../src/core/seeded-random.ts";
import { BatchPreparer } from "../src/events/batch-preparer.ts";
import { resolvePolicy } from "../src/events/ingest-policy.ts";
import { KvEventStream } from "../src/events/kv-event-stream.ts";
import { buildWorkload, type Workload } from "./events-workload.ts";
import { zmqRuns } from "./events-zmq.ts";
import { nativeSockets } from "../src/adapter/node/zmq-native.ts";
import { engineZmtpSockets } from "../src/zmq/zmtp-sockets.ts";
import { consume, describe, fmtRate, fmtRatio, measure, now, percentile, sinkValue, table, writeResults, type Measurement } from "./harness.ts";
import { nodeTcpDialer } from "../src/adapter/node/tcp-dialer.ts";
import * as hooks from "../test/support/kv-index-hooks.ts";

interface Args {
  blocksPerBatch: number;
  capacity: number;
  batches: number;
  background: number;
  samples: number;
  zmqRuns: number;
  quick: boolean;
  /** Which decoder the measured paths use: "core" (WASM, the default) or "host" (TypeScript, the earlier path). */
  decoder: "core" | "host";
}

function parseArgs(argv: string[]): Args {
  const a: Args = { blocksPerBatch: 128, capacity: 8192, batches: 400, background: 1 << 19, samples: 10, zmqRuns: 5, quick: false, decoder: "core" };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]!;
    const int = (): number => {
      const n = Number(argv[++i]);
      if (!Number.isInteger(n) || n < 0) throw new Error(`${k} needs a non-negative integer`);
      return n;
    };
    if (k === "--blocks-per-batch") a.blocksPerBatch = int();
    else if (k === "--capacity") a.capacity = int();
    else if (k === "--batches") a.batches = int();
    else if (k === "--background") a.background = int();
    else if (k === "--samples") a.samples = int();
    else if (k === "--zmq-runs") a.zmqRuns = int();
    else if (k === "--quick") a.quick = true;
    else if (k === "--decoder") {
      const d = argv[++i];
      if (d !== "core" && d !== "host") throw new Error("--decoder needs core or host");
      a.decoder = d;
    }
    else throw new Error(`unknown flag ${k}`);
  }
  if (a.quick) Object.assign(a, { batches: Math.min(a.batches, 150), samples: Math.min(a.samples, 5), zmqRuns: Math.min(a.zmqRuns, 3) });
  return a;
}

const WORKER = "bench-engine";
/** Raw rates measured around a ZeroMQ group that differ by more than this make its ratio unreliable (a loaded host). */
const DRIFT = 0.15;
const policy = resolvePolicy({ blockSize: 16 });

/** An index sized to this one worker: twice its engine's cache, all of it in CPU caches. */
function smallIndex(module: WebAssembly.Module, capacityBlocks: number): KvIndex {
  let cap = 1024;
  while (cap < capacityBlocks * 2) cap *= 2;
  return new KvIndex(module, { maxSlots: 4, capacity: cap });
}

/** The gateway's default index holding `background` blocks of 15 other workers (random prefixes of 1–64 blocks). */
function fleetIndex(module: WebAssembly.Module, background: number): KvIndex {
  const idx = new KvIndex(module);
  const r = seededRandom(15);
  const w = new EventBatchWriter(1 << 20);
  const slots = Array.from({ length: 15 }, (_, i) => idx.slotFor(`fleet-${i}`, 0));
  for (let done = 0, s = 0; done < background; s = (s + 1) % slots.length) {
    const n = Math.min(background - done, 1 + r.int(64));
    const hashes = Array.from({ length: n }, () => r.u64()), locals = Array.from({ length: n }, () => r.u64());
    if (w.byteLength + 24 + 16 * n > idx.options.eventBytes) { idx.applyBatch(w.bytes()); w.reset(); }
    w.stored(slots[s]!, null, hashes, locals);
    done += n;
  }
  if (w.records > 0) idx.applyBatch(w.bytes());
  const c = idx.counters();
  if (idx.stats().entries !== background || c.evicted + c.capacity > 0) throw new Error(`background fill: ${JSON.stringify(c)}`);
  return idx;
}

/** The decoder's records equal the core encoder's; one cycle through a stream applies every event and leaves the worker empty. */
function verify(idx: KvIndex, w: Workload): string[] {
  const errors: string[] = [];
  const before = idx.counters();
  for (const form of ["array", "map"] as const) {
    const slot = idx.slotFor(WORKER, 0);
    const binary = w.binary(slot);
    for (const coreDecode of [true, false]) {
      const prep = new BatchPreparer(idx, WORKER, 0, policy, { coreDecode });
      w.payloads[form].forEach((p, i) => {
        prep.prepare(p);
        if (Buffer.compare(prep.snapshot().bytes, binary[i]!) !== 0) errors.push(`${form} batch ${i}: ${coreDecode ? "core" : "host"} records differ from EventBatchWriter's`);
      });
      const expect = coreDecode ? { core: w.payloads[form].length, host: 0 } : { core: 0, host: w.payloads[form].length };
      if (prep.stats.core !== expect.core || prep.stats.host !== expect.host) errors.push(`${form}: decoder stats ${JSON.stringify(prep.stats)}`);
    }
    const s = new KvEventStream(idx, { worker: WORKER, blockSize: 16 });
    w.payloads[form].forEach((p, i) => s.onBatch(i, p));
    if (hooks.treeSize(idx, WORKER) !== 0) errors.push(`${form}: ${hooks.treeSize(idx, WORKER)} blocks left after the drain`);
    if (s.counters.blocksStored !== w.stats.storedBlocks || s.counters.corruptFrames > 0) errors.push(`${form}: stream counters ${JSON.stringify(s.counters)}`);
  }
  const c = idx.counters();
  for (const k of ["parentMissing", "invalid", "capacity", "unknownRemoved", "corrupt", "evicted"] as const) {
    if (c[k] !== before[k]) errors.push(`core counter ${k} moved by ${c[k] - before[k]}`);
  }
  return errors;
}

export async function main(argv: string[]): Promise<void> {
  const args = parseArgs(argv);
  const started = now();
  const load0 = loadavg().map((x) => x.toFixed(2)).join(" ");
  const module = await loadCoreModule();
  const log = (s = ""): void => console.log(s);
  const w = buildWorkload({ seed: 6, blocksPerBatch: args.blocksPerBatch, capacityBlocks: args.capacity, batches: args.batches, blockSize: 16 });
  const st = w.stats;
  log(`kvgate events benchmark — ${new Date().toISOString()}`);
  log(`workload: one vLLM worker, ${st.batches} engine batches (${args.blocksPerBatch} blocks stored per step, cache ${args.capacity} blocks, then drained), ` +
    `${st.storedEvents} BlockStored (${st.storedBlocks} blocks) + ${st.removedEvents} BlockRemoved (one per block, as vLLM sends them)`);
  log(`  ${st.events} events, ${st.blockOps} block ops per cycle; msgpack ${(st.msgpackBytes.array / 1024).toFixed(0)} KiB (array) / ` +
    `${(st.msgpackBytes.map / 1024).toFixed(0)} KiB (map), binary records ${(st.binaryBytes / 1024).toFixed(0)} KiB`);
  const fleet = fleetIndex(module, args.background);
  const small = smallIndex(module, args.capacity);
  log(`index: default options (capacity 2^${Math.log2(fleet.options.capacity)}, ${fleet.options.maxSlots} slots) with ${args.background} background blocks; ` +
    `sensitivity index capacity 2^${Math.log2(small.options.capacity)}`);
  const errors = [...verify(fleet, w), ...verify(small, w)];
  log(`verification (decoder records byte-equal to EventBatchWriter's, every event applied, worker empty after each cycle): ${errors.length ? "FAILED" : "ok"}`);
  for (const e of errors) log(`    ${e}`);

  const S = args.samples, opsPerIter = st.blockOps;
  const coreDecode = args.decoder === "core";
  log(`decoder measured: ${args.decoder === "core" ? "in the WASM core (TypeScript for the shapes it declines)" : "TypeScript only (--decoder host)"}`);
  const m: Record<string, Measurement> = {};
  const raw = (idx: KvIndex, name: string): Measurement => {
    const binary = w.binary(idx.slotFor(WORKER, 0));
    return measure(name, (n) => {
      let a = 0;
      for (let i = 0; i < n; i++) for (const b of binary) a += idx.applyBatch(b).records;
      return a;
    }, { opsPerIter, samples: S });
  };
  const streamed = (idx: KvIndex, form: "array" | "map", name: string): Measurement => {
    const s = new KvEventStream(idx, { worker: WORKER, blockSize: 16, coreDecode });
    let seq = 0;
    return measure(name, (n) => {
      for (let i = 0; i < n; i++) for (const p of w.payloads[form]) s.onBatch(seq++, p);
      return s.counters.batches;
    }, { opsPerIter, samples: S });
  };
  m.raw = raw(fleet, "(a) raw: applyBatch of pre-encoded binary batches");
  for (const form of ["array", "map"] as const) {
    const prep = new BatchPreparer(fleet, WORKER, 0, policy, { coreDecode });
    m[`decode_${form}`] = measure(`(b) decode only, ${form} events`, (n) => {
      let a = 0;
      for (let i = 0; i < n; i++) for (const p of w.payloads[form]) a += prep.prepare(p).records;
      return a;
    }, { opsPerIter, samples: S });
    m[`stream_${form}`] = streamed(fleet, form, `(c) decode + apply in process, ${form} events`);
  }
  m.rawSmall = raw(small, "(a′) raw, worker-sized index");
  m.streamSmall = streamed(small, "array", "(c′) decode + apply, worker-sized index, array events");

  const zmq: Record<string, number[]> = {};
  const messages = args.quick ? 1_500 : 3_000;
  const zmtp = engineZmtpSockets(nodeTcpDialer);
  // The two clients alternate per encoding, so a change in the host's load falls on both.
  for (const form of ["array", "map"] as const) {
    zmq[`drain_${form}`] = await zmqRuns(zmtp, "drain", w.payloads[form], st.blockOps, fleet, WORKER, args.zmqRuns, messages, coreDecode);
    zmq[`native_drain_${form}`] = await zmqRuns(nativeSockets, "drain", w.payloads[form], st.blockOps, fleet, WORKER, args.zmqRuns, messages, coreDecode);
  }
  // The host's speed drifts over the ZeroMQ runs: each group is divided by the raw rate measured just before and just
  // after it, and a group whose two raw figures disagree by more than DRIFT is reported as unreliable.
  m.rawMid = raw(fleet, "(a) raw again, between the drain and stream runs");
  for (const form of ["array", "map"] as const) {
    zmq[`stream_${form}`] = await zmqRuns(zmtp, "stream", w.payloads[form], st.blockOps, fleet, WORKER, args.zmqRuns, 4 * messages, coreDecode);
  }
  zmq.sink_array = await zmqRuns(zmtp, "sink", w.payloads.array, st.blockOps, fleet, WORKER, args.zmqRuns, messages, coreDecode);
  zmq.native_sink_array = await zmqRuns(nativeSockets, "sink", w.payloads.array, st.blockOps, fleet, WORKER, args.zmqRuns, messages, coreDecode);
  m.rawAfter = raw(fleet, "(a) raw again, after the ZeroMQ runs");
  const rawDrain = (m.raw.medianNs + m.rawMid.medianNs) / 2;
  const rawStream = (m.rawMid.medianNs + m.rawAfter.medianNs) / 2;
  const drift = (a: number, b: number): number => Math.max(a, b) / Math.min(a, b) - 1;
  const driftDrain = drift(m.raw.medianNs, m.rawMid.medianNs);
  const driftStream = drift(m.rawMid.medianNs, m.rawAfter.medianNs);

  const perEvent = st.events / st.blockOps;
  const rows: string[][] = [];
  const ratios: Record<string, number> = {};
  const nsOf: Record<string, number> = {};
  const add = (key: string, name: string, ns: number, base = m.raw!.medianNs): void => {
    ratios[key] = base / ns;
    nsOf[key] = ns;
    rows.push([name, fmtRate((1e9 / ns) * perEvent, "events/s"), fmtRate(1e9 / ns, "block-ops/s"), `${ns.toFixed(1)} ns`, fmtRatio(ratios[key]!)]);
  };
  add("raw", m.raw.name, m.raw.medianNs);
  for (const form of ["array", "map"] as const) {
    add(`decode_${form}`, m[`decode_${form}`]!.name, m[`decode_${form}`]!.medianNs);
    add(`stream_${form}`, m[`stream_${form}`]!.name, m[`stream_${form}`]!.medianNs);
    add(`zmq_${form}`, `(d) ZeroMQ to index (router side, ZMTP client), ${form} events`, percentile(zmq[`drain_${form}`]!, 50), rawDrain);
    add(`zmq_native_${form}`, `(d′) the same over the native zeromq module, ${form} events`, percentile(zmq[`native_drain_${form}`]!, 50), rawDrain);
  }
  for (const form of ["array", "map"] as const) {
    add(`zmq_stream_${form}`, `(e) ZeroMQ end to end, engine thread publishing, ${form}`, percentile(zmq[`stream_${form}`]!, 50), rawStream);
  }
  add("zmq_transport", "(f) ZeroMQ transport only (frames dropped), ZMTP, array", percentile(zmq.sink_array!, 50), rawStream);
  add("zmq_native_transport", "(f′) the same over the native zeromq module", percentile(zmq.native_sink_array!, 50), rawStream);
  add("raw_mid", m.rawMid.name, m.rawMid.medianNs);
  add("raw_after", m.rawAfter.name, m.rawAfter.medianNs);
  add("rawSmall", m.rawSmall.name, m.rawSmall.medianNs, m.rawSmall.medianNs);
  add("streamSmall", `${m.streamSmall.name} (÷ a′)`, m.streamSmall.medianNs, m.rawSmall.medianNs);
  log();
  for (const k of Object.keys(m)) log(`  ${describe(m[k]!, "blk")}`);
  for (const [k, runs] of Object.entries(zmq)) log(`  ZeroMQ ${k.padEnd(12)} ns/block-op per run: ${runs.map((x) => x.toFixed(1)).join(", ")}`);
  log();
  log(table(["path", "events/s", "block-ops/s", "per block op", "÷ raw rate"], rows));
  const worst = Math.min(ratios.zmq_array!, ratios.zmq_map!);
  const worstStream = Math.min(ratios.zmq_stream_array!, ratios.zmq_stream_map!);
  log();
  const verdict = (ratio: number, d: number): string =>
    d > DRIFT ? `UNRELIABLE (raw rate moved ${(d * 100).toFixed(0)}% around it: rerun)` : ratio >= 0.5 ? "MET" : "MISSED";
  log(`target: ZeroMQ to index ≥ 50% of the raw apply rate — router side (d) ${(worst * 100).toFixed(0)}%, end to end (e) ` +
    `${(worstStream * 100).toFixed(0)}% (worse encoding each) → ${verdict(worst, driftDrain)} on (d), ${verdict(worstStream, driftStream)} on (e)`);
  log(`  ZMTP client ÷ native module on (d): array ${(ratios.zmq_array! / ratios.zmq_native_array!).toFixed(2)}×, ` +
    `map ${(ratios.zmq_map! / ratios.zmq_native_map!).toFixed(2)}× the rate`);
  log(`  (d) is ÷ the mean of the raw rate before and after the drains (${m.raw.medianNs.toFixed(1)} and ${m.rawMid.medianNs.toFixed(1)} ns), ` +
    `(e) and (f) of the raw rate before and after them (${m.rawMid.medianNs.toFixed(1)} and ${m.rawAfter.medianNs.toFixed(1)} ns)`);
  // Where a block op's time goes on the ZeroMQ path, from the medians above (ns per block op).
  const ns = (k: string): number => nsOf[k]!;
  for (const form of ["array", "map"] as const) {
    log(`  ${form}: raw apply ${ns("raw").toFixed(0)} + decoding and stream ${(ns(`stream_${form}`) - ns("raw")).toFixed(0)} ` +
      `(decode alone ${ns(`decode_${form}`).toFixed(0)}) + ZeroMQ receive and cold payloads ${(ns(`zmq_${form}`) - ns(`stream_${form}`)).toFixed(0)} ` +
      `(transport alone ${ns("zmq_transport").toFixed(0)}) = ${ns(`zmq_${form}`).toFixed(0)} ns`);
  }
  const load1 = loadavg().map((x) => x.toFixed(2)).join(" ");
  log(`load average ${load0} → ${load1}; checksum ${sinkValue()}; ${((now() - started) / 1e3).toFixed(1)} s`);
  consume(worst);
  const path = writeResults(args.decoder === "host" ? "events-host" : "events", {
    args, workload: st, verification: errors, measurements: m, zmqNsPerBlockOp: zmq, ratiosToRaw: ratios,
    target: {
      zmqOverRaw: 0.5, worst, met: worst >= 0.5, worstEndToEnd: worstStream, metEndToEnd: worstStream >= 0.5,
      rawDrift: { drain: driftDrain, stream: driftStream, limit: DRIFT }, reliable: driftDrain <= DRIFT && driftStream <= DRIFT,
    }, loadAverage: { start: load0, end: load1 }, wallMs: now() - started,
  });
  log(`results: ${path}`);
}
