/**
 * @module Router replicas as real processes (`node src/adapter/node/kvgate.mjs serve`) on loopback, for the replica
 * tests and bench/replicas.ts: start one on a chosen or free port, read its metrics, index digest and log, SIGKILL it.
 */
import { fileURLToPath } from "node:url";
import { freePort, start, waitForOutput, type Proc } from "../conformance/processes.ts";
import { parseIndexDigest, type IndexDigestDoc } from "../../src/replicas/index-divergence.ts";
import type { ReplayRequest } from "../../src/replay/replay-request.ts";

export const KVGATE_BIN = fileURLToPath(new URL("../../src/adapter/node/kvgate.mjs", import.meta.url));
export const ADMIN_TOKEN = "replica-test-token";

export interface ReplicaSpec {
  id: string;
  /** Engines as `--worker` entries (KV events on). */
  workers: readonly { id: string; url: string; totalKvBlocks?: number }[];
  model: string;
  blockSize: number;
  /** nats://..., or undefined for a replica that shares nothing. */
  nats?: string;
  sharing?: "on" | "off";
  heartbeatMs?: number;
  stream?: string;
  port?: number;
  extra?: readonly string[];
  /** CPUs the process may run on (`taskset -c` list), for benches that give the measured gateway a core of its own. */
  cpus?: string;
}

export interface ReplicaProc {
  id: string;
  port: number;
  url: string;
  proc: Proc;
  spec: ReplicaSpec;
  output(): string;
  kill(): Promise<void>;
  stop(): Promise<void>;
}

export function replicaArgs(s: ReplicaSpec, port: number): string[] {
  const args = [
    KVGATE_BIN, "serve", "--port", String(port), "--admin-token", ADMIN_TOKEN, "--log", "warn", "--block-size", String(s.blockSize),
    "--health-check-ms", "0", "--tick-ms", "50", "--replica-id", s.id,
  ];
  for (const w of s.workers) {
    args.push("--worker", `url=${w.url},id=${w.id},models=${s.model},kv_events=true${w.totalKvBlocks ? `,total_kv_blocks=${w.totalKvBlocks}` : ""}`);
  }
  if (s.nats) args.push("--nats", s.nats);
  args.push("--state-sharing", s.sharing ?? (s.nats ? "on" : "off"));
  if (s.heartbeatMs) args.push("--replica-heartbeat-ms", String(s.heartbeatMs));
  if (s.stream) args.push("--nats-stream", s.stream);
  return [...args, ...(s.extra ?? [])];
}

/** Starts the replica and waits until it listens (and, sharing on, until it is connected to NATS). */
export async function startReplica(spec: ReplicaSpec): Promise<ReplicaProc> {
  const port = spec.port ?? (await freePort());
  const args = replicaArgs(spec, port);
  // taskset execs node in place: the pid, process group and signals are node's.
  const proc = spec.cpus ? start("taskset", ["-c", spec.cpus, process.execPath, ...args]) : start(process.execPath, args);
  await waitForOutput(proc, /kvgate listening on http:\/\/\S+/, 60_000);
  const url = `http://127.0.0.1:${port}`;
  const r: ReplicaProc = { id: spec.id, port, url, proc, spec, output: () => proc.output(), kill: () => proc.kill(), stop: () => proc.stop(3_000) };
  if (spec.nats && spec.sharing !== "off") {
    const end = Date.now() + 30_000;
    while ((await metric(url, "kvgate_sync_connected").catch(() => NaN)) !== 1) {
      if (Date.now() > end) throw new Error(`replica ${spec.id} did not connect to NATS:\n${proc.output()}`);
      await new Promise((res) => setTimeout(res, 50));
    }
  }
  return r;
}

/** One unlabelled sample of /metrics (NaN when absent). */
export async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? NaN : Number(line.slice(name.length + 1));
}

export async function digestOf(url: string): Promise<IndexDigestDoc> {
  const res = await fetch(`${url}/admin/index/digest`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  if (!res.ok) throw new Error(`${url}/admin/index/digest: HTTP ${res.status}`);
  return parseIndexDigest(await res.json());
}

/** Remote bookings this replica counts, summed over every worker rank (from /admin/workers). */
export async function remoteBookings(url: string): Promise<number> {
  const res = await fetch(`${url}/admin/workers`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const body = (await res.json()) as { data: { ranks: { remote: { requests: number } }[] }[] };
  return body.data.reduce((n, w) => n + w.ranks.reduce((m, r) => m + r.remote.requests, 0), 0);
}

/**
 * Interleaved conversations for replica tests: each shares a system prompt segment and grows by one turn segment per
 * request, so later turns hit the blocks earlier ones cached. Arrivals `gapMs` apart.
 */
export function conversations(o: { conversations: number; turns: number; gapMs: number; systemTokens: number; turnTokens: number; outputTokens: number }): ReplayRequest[] {
  const out: ReplayRequest[] = [];
  let next = 10;
  const hist = Array.from({ length: o.conversations }, (_, c) => [{ id: 1 + (c % 2), length: o.systemTokens }]);
  for (let t = 0; t < o.turns; t++) {
    for (let c = 0; c < o.conversations; c++) {
      const segs = hist[c]!;
      segs.push({ id: next++, length: o.turnTokens });
      const index = out.length;
      out.push({ index, at: index * o.gapMs, inputLength: segs.reduce((n, s) => n + s.length, 0), outputLength: o.outputTokens, segments: segs.map((s) => ({ ...s })) });
    }
  }
  return out;
}
