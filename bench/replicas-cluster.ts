/**
 * @module The replicas bench's cluster: one shared simulated fleet (engines in this process, or `kvgate sim`
 * processes) whose engine i pushes its KV events to replica i mod N, and N gateway replicas as real processes
 * (`kvgate serve`) sharing over one nats-server; plus the replay through them and the figures read back.
 */
import { fileURLToPath } from "node:url";
import { startSimServer, type SimServer } from "../src/adapter/node/sim-server.ts";
import { runThroughGateways, type GatewayRun } from "../src/replay/gateway-run.ts";
import type { ReplayRequest } from "../src/replay/replay-request.ts";
import { policyResult, type PolicyResult } from "../src/replay/replay-results.ts";
import { performanceWallClock } from "../src/replay/schedule.ts";
import { realClock } from "../src/sim/sim-clock.ts";
import { freePort, start, waitForOutput, type Proc } from "../test/conformance/processes.ts";
import { ADMIN_TOKEN, startReplica, type ReplicaProc } from "../test/replicas/replica-procs.ts";

export const MODEL = "kvgate-sim";
export const BLOCK_SIZE = 64;
const KVGATE = fileURLToPath(new URL("../src/adapter/node/kvgate.mjs", import.meta.url));

export interface FleetOptions {
  engines: number;
  numGpuBlocks: number;
  /** Engine ms per wall ms. */
  speedup: number;
  maxModelLen: number;
  /** `kvgate sim` processes instead of engines in this process (keeps this process's CPU for the client). */
  processes?: boolean;
}

export interface ClusterOptions {
  replicas: number;
  sharing: "on" | "off";
  /** JetStream stream: one per cluster, so a cluster never reads another's engines' events. */
  stream: string;
  nats?: string;
  heartbeatMs: number;
  fleet: FleetOptions;
  /** Per replica, the CPUs it may run on (`taskset -c` lists); unset: anywhere. */
  cpus?: (i: number) => string | undefined;
}

export interface Cluster {
  sims: { url: string; close(): Promise<void> }[];
  replicas: ReplicaProc[];
  urls(): string[];
  close(): Promise<void>;
}

async function simProcess(id: string, f: FleetOptions, eventsUrl: string): Promise<{ url: string; close(): Promise<void> }> {
  const p: Proc = start(process.execPath, [
    KVGATE, "sim", "--port", "0", "--model", MODEL, "--worker-id", id, "--block-size", String(BLOCK_SIZE), "--num-gpu-blocks", String(f.numGpuBlocks),
    "--max-model-len", String(f.maxModelLen), "--speedup", String(f.speedup), "--events-url", eventsUrl, "--events-token", ADMIN_TOKEN, "--events-flush-ms", "5",
  ]);
  const m = await waitForOutput(p, /serving \S+ at (http:\/\/[^\s,]+)/, 60_000);
  return { url: m[1]!, close: () => p.stop(3_000) };
}

/** Deletes a cluster's stream: streams may not share subjects, so the next cluster's cannot exist beside it. */
async function deleteStream(servers: string, name: string): Promise<void> {
  const { connect } = await import("@nats-io/transport-node");
  const { jetstreamManager } = await import("@nats-io/jetstream");
  const nc = await connect({ servers, timeout: 5_000 });
  try {
    await (await jetstreamManager(nc)).streams.delete(name).catch(() => false);
  } finally {
    await nc.close();
  }
}

/**
 * JIT-warms a fresh replica's routing path (parse, hash, match, score) with decisions only (`/v1/route`, nothing
 * dispatched or booked, nothing recorded for workers with KV events), on prompts no replayed request shares; then its
 * proxy path.
 */
async function warmRouting(url: string): Promise<void> {
  for (let i = 0; i < 30; i++) {
    const prompt = Array.from({ length: 4096 }, (_, k) => 200_000 + ((i * 7919 + k * 104_729) % 50_000));
    const res = await fetch(`${url}/v1/route`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, prompt, max_tokens: 1 }) });
    if (!res.ok) throw new Error(`${url}/v1/route: HTTP ${res.status} ${await res.text()}`);
    await res.arrayBuffer();
  }
  // And the proxy path (dispatch, the SSE relay, usage) with a few short streamed completions: a cold replica's first
  // streams are several times slower, and with N replicas N times as many of them would land in the measured tail.
  // Short unique prompts keep what they leave in the engines' caches to a few blocks.
  for (let i = 0; i < 12; i++) {
    const prompt = Array.from({ length: 4 * BLOCK_SIZE }, (_, k) => 300_000 + ((i * 15_485_863 + k * 7_919 + Number(new URL(url).port)) % 60_000));
    const res = await fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, prompt, max_tokens: 4, stream: true }) });
    if (!res.ok) throw new Error(`${url}/v1/completions: HTTP ${res.status} ${await res.text()}`);
    await res.arrayBuffer();
  }
}

export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const ports = await Promise.all(Array.from({ length: o.replicas }, () => freePort()));
  const sims: Cluster["sims"] = [];
  const replicas: ReplicaProc[] = [];
  const close = async (): Promise<void> => {
    await Promise.all(replicas.map((r) => r.stop()));
    await Promise.all(sims.map((s) => s.close()));
    if (o.sharing === "on" && o.nats) await deleteStream(o.nats, o.stream);
  };
  try {
    for (let i = 0; i < o.fleet.engines; i++) {
      const eventsUrl = `http://127.0.0.1:${ports[i % o.replicas]}/admin/kv-events`;
      if (o.fleet.processes) {
        sims.push(await simProcess(`w${i}`, o.fleet, eventsUrl));
        continue;
      }
      const s: SimServer = await startSimServer({
        clock: realClock(), speedupRatio: o.fleet.speedup, numGpuBlocks: o.fleet.numGpuBlocks, blockSize: BLOCK_SIZE, maxModelLen: o.fleet.maxModelLen,
        workerId: `w${i}`, model: MODEL, events: { url: eventsUrl, token: ADMIN_TOKEN, flushIntervalMs: 5 },
      });
      sims.push(s);
    }
    const workers = sims.map((s, i) => ({ id: `w${i}`, url: s.url, totalKvBlocks: o.fleet.numGpuBlocks }));
    const started = await Promise.all(ports.map((port, i) => startReplica({
      id: `r${i}`, port, workers, model: MODEL, blockSize: BLOCK_SIZE, nats: o.sharing === "on" ? o.nats : undefined, sharing: o.sharing,
      heartbeatMs: o.heartbeatMs, stream: o.stream, extra: ["--max-body-bytes", String(64 << 20)], cpus: o.cpus?.(i),
    })));
    replicas.push(...started);
    await Promise.all(started.map((r) => warmRouting(r.url)));
  } catch (e) {
    await close();
    throw e;
  }
  return { sims, replicas, urls: () => replicas.map((r) => r.url), close };
}

export const host = { wall: performanceWallClock, fetch: globalThis.fetch.bind(globalThis) };

/** Replays `requests` through the cluster's gateways (round-robin) on the engines' time base. */
export function replay(urls: readonly string[], requests: readonly ReplayRequest[], speedup: number, traceSpeedup: number,
  extra: Partial<Parameters<typeof runThroughGateways>[0]> = {}): Promise<GatewayRun> {
  return runThroughGateways({ policy: "kv_events", gateways: urls, requests, model: MODEL, traceSpeedup, engineSpeedup: speedup, host, ...extra });
}

export function summary(run: GatewayRun, urls: readonly string[]): PolicyResult {
  return policyResult(run, BLOCK_SIZE, urls);
}
