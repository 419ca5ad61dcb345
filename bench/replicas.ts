/**
 * @module `npm run bench -- replicas [--quick]`: issue 14's acceptance runs for router replicas over NATS. One
 * nats-server (random loopback port, temporary store), one shared simulated fleet per run, N `kvgate serve`
 * processes, the replay through them with the round-robin front of `kvgate replay --gateway`:
 *   (a) 1, 2 and 4 replicas sharing, and 4 not sharing: engine-reported hit rate and p99 TTFT relative to 1 replica
 *       (engines in real time in the full run: about 5 minutes per configuration);
 *   (b) one of 3 SIGKILLed mid-replay: failed requests, time until the others drop its bookings, and its predicted
 *       hit rate when restarted, relative to the others';
 *   (c) nats-server stopped mid-replay and started again: failures, divergence while down, time until it is 0;
 *   (d) sharing cost: requests/s through one gateway with sharing on (2 replicas) vs off.
 * `--only a,c` runs some of them (written to replicas-ac.json). Writes bench/results/replicas.json.
 */
import { spawnSync } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { sendCompletion } from "../src/replay/completion-client.ts";
import type { ReplayRequest } from "../src/replay/replay-request.ts";
import { predictedHitRate } from "../src/replay/replay-results.ts";
import { promptTokens } from "../src/replay/synthetic-tokens.ts";
import { generateWorkload } from "../src/replay/workload-generator.ts";
import { indexDivergence } from "../src/replicas/index-divergence.ts";
import { NatsServer, natsServerPath } from "../test/replicas/nats-server.ts";
import { digestOf, startReplica } from "../test/replicas/replica-procs.ts";
import { table, writeResults } from "./harness.ts";
import { processCpuSeconds } from "./processes.ts";
import { BLOCK_SIZE, MODEL, replay, startCluster, summary, type FleetOptions } from "./replicas-cluster.ts";

const HEARTBEAT_MS = 500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg().map((x) => Number(x.toFixed(2)));
const pct = (v: number) => (Number.isFinite(v) ? `${(100 * v).toFixed(1)}%` : "-");
const ratio = (v: number) => (Number.isFinite(v) ? v.toFixed(3) : "-");

interface Plan {
  requests: number;
  fleet: FleetOptions;
  traceSpeedup: number;
  /**
   * (a) only: engine and trace speed. Its p99 TTFT is in engine ms, so every wall ms the 2-core machine's processes
   * wait for a CPU counts `speedup` times; at 4× wall, 4 replicas' contention alone added 25–45% to p99 (a run at 1×
   * had 2 replicas at 0.85 of one). The full run replays in real time, four times as long.
   */
  scaling: { speedup: number; traceSpeedup: number };
  throughputSeconds: number;
}

function plan(quick: boolean): Plan {
  return {
    requests: quick ? 120 : 300,
    fleet: { engines: 4, numGpuBlocks: 4096, speedup: 4, maxModelLen: 40_000 },
    // The full run has 2.5× the requests over about the same trace time; half the arrival rate keeps the fleet out of
    // overload, so TTFT is the engines' work and not a queue.
    traceSpeedup: quick ? 1 : 0.5,
    scaling: quick ? { speedup: 4, traceSpeedup: 1 } : { speedup: 1, traceSpeedup: 0.125 },
    throughputSeconds: quick ? 4 : 8,
  };
}

let streams = 0;
const stream = (tag: string) => `KVGATE_BENCH_${tag}_${++streams}`;

/** A sample of /metrics by its full name with labels; 0 when absent. */
async function counter(url: string, name: string): Promise<number> {
  const line = (await (await fetch(`${url}/metrics`)).text()).split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

async function divergenceOf(urls: readonly string[]): Promise<number> {
  return indexDivergence(await Promise.all(urls.map((u) => digestOf(u)))).divergence;
}

/** (a) hit rate and p99 TTFT through 1, 2 and 4 replicas sharing, and 4 not. */
async function scaling(p: Plan, nats: NatsServer, work: ReplayRequest[]) {
  const configs = [{ n: 1, sharing: "on" as const }, { n: 2, sharing: "on" as const }, { n: 4, sharing: "on" as const }, { n: 4, sharing: "off" as const }];
  const out: { replicas: number; sharing: string; hitRate: number; predictedHitRate: number; ttftP99Ms: number; ttftMeanMs: number; errors: number; load: number[] }[] = [];
  for (const c of configs) {
    const fleet = { ...p.fleet, speedup: p.scaling.speedup };
    const cl = await startCluster({ replicas: c.n, sharing: c.sharing, stream: stream(`A${c.n}${c.sharing}`), nats: nats.url, heartbeatMs: HEARTBEAT_MS, fleet });
    try {
      const run = await replay(cl.urls(), work, fleet.speedup, p.scaling.traceSpeedup, { idPrefix: `a${c.n}${c.sharing}` });
      const s = summary(run, cl.urls());
      out.push({ replicas: c.n, sharing: c.sharing, hitRate: s.summary.hitRate, predictedHitRate: s.predictedHitRate, ttftP99Ms: s.summary.ttftMs.p99, ttftMeanMs: s.summary.ttftMs.mean, errors: s.summary.errors, load: load() });
      console.log(`  (a) ${c.n} replica(s), sharing ${c.sharing}: hit ${pct(s.summary.hitRate)}, p99 TTFT ${s.summary.ttftMs.p99.toFixed(0)} engine ms, ${s.summary.errors} errors`);
    } finally {
      await cl.close();
    }
  }
  const base = out[0]!;
  return out.map((r) => ({ ...r, hitRateVs1: r.hitRate / base.hitRate, ttftP99Vs1: r.ttftP99Ms / base.ttftP99Ms }));
}

/** (b) SIGKILL one of 3 mid-replay, restart it, compare its first requests' predicted hit rate with the others'. */
async function kill(p: Plan, nats: NatsServer, work: ReplayRequest[]) {
  const cl = await startCluster({ replicas: 3, sharing: "on", stream: stream("B"), nats: nats.url, heartbeatMs: HEARTBEAT_MS, fleet: p.fleet });
  try {
    const cut = Math.floor(work.length * 0.6);
    const first = work.slice(0, cut), origin = work[cut]!.at;
    const later = work.slice(cut).map((r) => ({ ...r, at: r.at - origin }));
    const victim = cl.replicas[2]!, witness = cl.replicas[0]!;
    let killAt = NaN, deadAt = NaN, releaseMs = NaN;
    const t0 = performance.now();
    const acting: Promise<void>[] = [];
    const run = await replay(cl.urls(), first, p.fleet.speedup, p.traceSpeedup, {
      idPrefix: "b1",
      onSent: (i) => {
        if (i !== first[Math.floor(first.length / 3)]!.index) return;
        acting.push((async () => {
          const seen = witness.output().length;
          killAt = performance.now() - t0;
          await victim.kill();
          deadAt = performance.now() - t0;
          const end = Date.now() + 30_000;
          while (!witness.output().slice(seen).includes(`replica ${victim.id} missed`) && Date.now() < end) await sleep(10);
          releaseMs = performance.now() - t0 - killAt;
        })());
      },
    });
    await Promise.all(acting);
    const wallOf = (engineMs: number) => engineMs / p.fleet.speedup;
    const failed = run.records.filter((r) => r.error);
    const onVictim = (r: (typeof run.records)[number]) => r.gateway === victim.url;
    const inFlight = run.records.filter((r) => onVictim(r) && wallOf(r.sentAt) <= deadAt && (r.error || wallOf(r.sentAt + (r.e2eMs ?? 0)) > killAt)).length;
    const failedElsewhere = failed.filter((r) => !onVictim(r) || wallOf(r.sentAt) > deadAt).length;
    const restartT = performance.now();
    cl.replicas[2] = await startReplica({ ...victim.spec, port: victim.port });
    const restartMs = performance.now() - restartT;
    const back = await replay(cl.urls(), later, p.fleet.speedup, p.traceSpeedup, { idPrefix: "b2" });
    const mine = back.records.filter((r) => r.gateway === cl.replicas[2]!.url).slice(0, 10);
    const until = mine.length ? mine[mine.length - 1]!.sentAt : 0;
    const theirs = back.records.filter((r) => r.gateway !== cl.replicas[2]!.url && r.sentAt <= until);
    const res = {
      requests: run.records.length, failed: failed.length, inFlightOnKilled: inFlight, failedNotInFlight: failedElsewhere,
      bookingsReleasedMs: releaseMs, expiryMs: 3 * HEARTBEAT_MS, restartMs,
      restartedFirstRequests: mine.length, restartedPredictedHitRate: predictedHitRate(mine, BLOCK_SIZE),
      othersPredictedHitRate: predictedHitRate(theirs, BLOCK_SIZE), afterRestartErrors: back.records.filter((r) => r.error).length, load: load(),
    };
    console.log(`  (b) killed r2: ${res.failed} failed (${res.inFlightOnKilled} in flight on it, ${res.failedNotInFlight} others), bookings released after ${res.bookingsReleasedMs.toFixed(0)} ms; ` +
      `restarted in ${res.restartMs.toFixed(0)} ms, predicted hit ${pct(res.restartedPredictedHitRate)} vs others ${pct(res.othersPredictedHitRate)}`);
    return { ...res, warmRatio: res.restartedPredictedHitRate / res.othersPredictedHitRate };
  } finally {
    await cl.close();
  }
}

/** (c) nats-server down for the middle third of the replay. */
async function outage(p: Plan, nats: NatsServer, work: ReplayRequest[]) {
  const cl = await startCluster({ replicas: 3, sharing: "on", stream: stream("C"), nats: nats.url, heartbeatMs: HEARTBEAT_MS, fleet: p.fleet });
  try {
    const a = work[Math.floor(work.length / 3)]!.index, b = work[Math.floor((2 * work.length) / 3)]!.index;
    let downDivergence = NaN, upAt = NaN;
    const acting: Promise<void>[] = [];
    let downFrom = NaN, downTo = NaN;
    const run = await replay(cl.urls(), work, p.fleet.speedup, p.traceSpeedup, {
      idPrefix: "c",
      onSent: (i, at) => {
        if (i === a) {
          downFrom = at;
          acting.push(nats.stop());
        }
        if (i === b) {
          downTo = at;
          acting.push((async () => {
            await Promise.all(acting.slice(0, 1));
            downDivergence = await divergenceOf(cl.urls());
            await nats.restart();
            upAt = performance.now();
          })());
        }
      },
    });
    await Promise.all(acting);
    let d = await divergenceOf(cl.urls());
    while (d !== 0 && performance.now() - upAt < 60_000) {
      await sleep(100);
      d = await divergenceOf(cl.urls());
    }
    const zeroAfterMs = d === 0 ? performance.now() - upAt : NaN;
    // Why a divergence can stay: publishes beyond the outage buffer are dropped (kind="dropped"), and the peers see
    // those batches as sequence gaps they cannot fill.
    const dropped = await Promise.all(cl.urls().map((u) => counter(u, 'kvgate_sync_published_total{kind="dropped"}')));
    const gaps = await Promise.all(cl.urls().map((u) => counter(u, 'kvgate_kv_ingest_total{counter="gaps"}')));
    const during = run.records.filter((r) => r.sentAt >= downFrom && r.sentAt < downTo);
    const perReplica = cl.urls().map((u) => during.filter((r) => r.gateway === u && !r.error).length);
    const res = {
      requests: run.records.length, failed: run.records.filter((r) => r.error).length, routedDuringOutageByReplica: perReplica,
      divergenceWhileDown: downDivergence, divergenceAfter: d, zeroAfterNatsBackMs: zeroAfterMs, droppedPublishes: dropped, peerGaps: gaps, load: load(),
    };
    console.log(`  (c) NATS outage: ${res.failed} failed, routed while down per replica ${perReplica.join("/")}, divergence while down ${ratio(downDivergence)}, ` +
      `0 again ${Number.isFinite(zeroAfterMs) ? `${zeroAfterMs.toFixed(0)} ms after it returned` : "NOT reached"}; dropped publishes ${dropped.join("/")}, peer gaps ${gaps.join("/")}`);
    return res;
  } finally {
    await cl.close();
  }
}

/**
 * Gives the measured gateway a core of its own where taskset exists and there are 2+ CPUs: this process (and so the
 * engine processes it starts later) and nats-server move to CPUs 1..n-1. Returns that list, or undefined (no pinning).
 */
function pinning(nats: NatsServer): string | undefined {
  const n = cpus().length;
  if (n < 2 || process.env.KVGATE_BENCH_NO_PIN) return undefined;
  const rest = n === 2 ? "1" : `1-${n - 1}`;
  for (const pid of [process.pid, nats.pid]) {
    if (pid === undefined || spawnSync("taskset", ["-a", "-c", "-p", rest, String(pid)], { stdio: "ignore" }).status !== 0) return undefined;
  }
  return rest;
}

/**
 * (d) closed-loop requests/s through replica 0, sharing on (2 replicas) vs off (1), alternated; and the same per CPU
 * second of replica 0. The second replica, nats-server, the engines and the client share this machine's cores with
 * replica 0, so the raw rate also charges their CPU to it; the rate per CPU second of the gateway is what sharing
 * costs the gateway itself (its throughput when it has a core of its own).
 */
async function throughput(p: Plan, nats: NatsServer) {
  const fleet: FleetOptions = { engines: 2, numGpuBlocks: 16_384, speedup: 200, maxModelLen: 8192, processes: true };
  const rounds: { sharing: string; rps: number; rpsPerCpu: number; cpuShare: number; errors: number; load: number[] }[] = [];
  const pinned = pinning(nats);
  if (pinned) console.log(`  (d) replica 0 runs alone on CPU 0; this process, the engines, nats-server and replica 1 on CPUs ${pinned}`);
  let n = 0;
  // ABBA order, so a machine whose load drifts during the run does not favour either mode.
  for (const sharing of ["off", "on", "on", "off"] as const) {
    const cl = await startCluster({ replicas: sharing === "on" ? 2 : 1, sharing, stream: stream("D"), nats: nats.url, heartbeatMs: HEARTBEAT_MS, fleet,
      cpus: pinned ? (i) => (i === 0 ? "0" : pinned) : undefined });
    try {
      const url = cl.urls()[0]!;
      const end = performance.now() + p.throughputSeconds * 1000;
      let done = 0, errors = 0;
      const worker = async (k: number) => {
        while (performance.now() < end) {
          const i = n++;
          // A shared 256-token prefix and a unique tail: every request stores blocks, so sharing has events to carry.
          const req: ReplayRequest = { index: i, at: 0, inputLength: 512, outputLength: 4, segments: [{ id: 1 + (k % 4), length: 256 }, { id: 1_000_000 + i, length: 256 }] };
          const rec = await sendCompletion({ url, model: MODEL, index: i, requestId: `d-${i}`, tokens: promptTokens(req), maxTokens: 4, now: () => performance.now(), runStart: 0, fetch: globalThis.fetch });
          if (rec.error) errors++;
          else done++;
        }
      };
      const pid = cl.replicas[0]!.proc.child.pid;
      const t = performance.now(), cpu0 = processCpuSeconds(pid);
      await Promise.all(Array.from({ length: 16 }, (_, k) => worker(k)));
      const wall = (performance.now() - t) / 1000, cpu = processCpuSeconds(pid) - cpu0;
      rounds.push({ sharing, rps: done / wall, rpsPerCpu: done / cpu, cpuShare: cpu / wall, errors, load: load() });
      const r = rounds[rounds.length - 1]!;
      console.log(`  (d) sharing ${sharing}: ${r.rps.toFixed(0)} requests/s through one gateway, ${r.rpsPerCpu.toFixed(0)} per CPU second of it (it used ${(100 * r.cpuShare).toFixed(0)}% of a core; ${errors} errors)`);
    } finally {
      await cl.close();
    }
  }
  const mean = (s: string, k: "rps" | "rpsPerCpu" = "rps") => rounds.filter((r) => r.sharing === s).reduce((a, r) => a + r[k], 0) / 2;
  return {
    rounds, offRps: mean("off"), onRps: mean("on"), ratio: mean("on") / mean("off"),
    offRpsPerCpu: mean("off", "rpsPerCpu"), onRpsPerCpu: mean("on", "rpsPerCpu"), perCpuRatio: mean("on", "rpsPerCpu") / mean("off", "rpsPerCpu"),
  };
}

export async function main(args: string[]): Promise<void> {
  if (!natsServerPath) throw new Error("bench replicas needs nats-server on PATH (Debian: apt-get install nats-server)");
  const quick = args.includes("--quick");
  const o = args.indexOf("--only");
  const only = new Set(o >= 0 ? (args[o + 1] ?? "").split(",") : ["a", "b", "c", "d"]);
  const p = plan(quick);
  const work = generateWorkload({ requests: p.requests, sessionsPerSec: 4, seed: 42 });
  const nats = await NatsServer.start();
  const loadBefore = load();
  console.log(`replicas bench${quick ? " (quick)" : ""}: ${p.requests} requests, ${p.fleet.engines} engines × ${p.fleet.numGpuBlocks} blocks of ${BLOCK_SIZE}, engines ${p.fleet.speedup}× wall (${p.scaling.speedup}× in (a), trace at ${p.scaling.traceSpeedup}×); load ${loadBefore.join(" ")}`);
  try {
    // Warms this process's client code on a throwaway cluster, so the first measured run does not pay for it.
    const warm = await startCluster({ replicas: 1, sharing: "off", stream: stream("W"), heartbeatMs: HEARTBEAT_MS, fleet: p.fleet });
    await replay(warm.urls(), work.slice(0, 20), p.fleet.speedup, p.traceSpeedup, { idPrefix: "w" }).finally(() => warm.close());
    const a = only.has("a") ? await scaling(p, nats, work) : [];
    const b = only.has("b") ? await kill(p, nats, work) : undefined;
    const c = only.has("c") ? await outage(p, nats, work) : undefined;
    const d = only.has("d") ? await throughput(p, nats) : undefined;
    if (a.length) console.log(`\n(a) relative to 1 replica (targets: hit rate within 5%, p99 TTFT within 10%; sharing off shows the drop)`);
    if (a.length) console.log(table(["replicas", "sharing", "hit rate", "vs 1", "predicted", "p99 TTFT ms", "vs 1", "errors"],
      a.map((r) => [String(r.replicas), r.sharing, pct(r.hitRate), ratio(r.hitRateVs1), pct(r.predictedHitRate), r.ttftP99Ms.toFixed(0), ratio(r.ttftP99Vs1), String(r.errors)])));
    if (b) console.log(`(b) kill 1 of 3: failed ${b.failed} of ${b.requests} (in flight on it ${b.inFlightOnKilled}, elsewhere ${b.failedNotInFlight}); bookings released ${b.bookingsReleasedMs.toFixed(0)} ms after the kill ` +
      `(expiry ${b.expiryMs} ms); restarted replica's predicted hit / others' = ${ratio(b.warmRatio)} (target >= 0.8)`);
    if (c) console.log(`(c) NATS outage: failed ${c.failed}; divergence while down ${ratio(c.divergenceWhileDown)}, after ${ratio(c.divergenceAfter)} (0 ${Number.isFinite(c.zeroAfterNatsBackMs) ? `${c.zeroAfterNatsBackMs.toFixed(0)} ms after NATS returned` : "not reached"})`);
    if (d) console.log(`(d) sharing cost: ${d.onRps.toFixed(0)} vs ${d.offRps.toFixed(0)} requests/s through one gateway, on / off = ${ratio(d.ratio)}; ` +
      `per CPU second of the gateway ${d.onRpsPerCpu.toFixed(0)} vs ${d.offRpsPerCpu.toFixed(0)}, on / off = ${ratio(d.perCpuRatio)} (target >= 0.8)`);
    const loadAfter = load();
    console.log(`load average before ${loadBefore.join(" ")}, after ${loadAfter.join(" ")}`);
    const file = writeResults(o >= 0 ? `replicas-${[...only].sort().join("")}` : "replicas", {
      quick, only: [...only], plan: p, heartbeatMs: HEARTBEAT_MS, loadBefore, loadAfter, scaling: a, kill: b, outage: c, throughput: d,
      note: "engine i pushes its KV events to replica i mod N; with sharing off a replica knows only its own engines' blocks. Times in engine ms (wall × engine speed-up) except the *Ms fields of (b), (c) and (d), which are wall ms.",
    });
    console.log(`wrote ${file}`);
  } finally {
    await nats.dispose();
  }
}
