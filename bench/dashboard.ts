/**
 * @module `npm run bench -- dashboard`: issue 17 acceptance 4 — what watching costs. kvgate (Node, a real process)
 * routes streamed chats to two simulated engines (their own process each, KV events pushed to kvgate) while closed-loop
 * clients measure completed requests/s in three modes taking turns round by round, so machine drift hits all alike:
 *   - none:    nobody watches;
 *   - poll:    a client polls GET /v1/stats?since= as the page does (every --poll-ms, default the page's 2 s);
 *   - browser: the real /dashboard open in headless Chromium (Debian's /usr/bin/chromium; skipped without it).
 * The median over rounds of each watched mode's rate over the same round's `none` is its ratio (target: a cost under
 * 5%, i.e. ratio ≥ 0.95), beside the bound one poll's round trip per period puts on it. Where taskset works and there
 * are 2+ CPUs the gateway runs alone on CPU 0 and everything else (this client, the engines, Chromium) on the others,
 * and the ratio is taken per CPU second of the gateway: on 2 cores the raw rate also charges the browser's and the
 * engines' CPU to the gateway (KVGATE_BENCH_NO_PIN=1: no pinning, raw ratio). Measured and reported, never
 * asserted. Also prints the size and server time of one full and one incremental /v1/stats.
 *
 * Flags: --concurrency N (16)  --seconds S (2)  --rounds N (12)  --warmup S (8)  --max-tokens N (8)  --poll-ms N (2000)
 *        --speedup X (1000)  --no-browser
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { percentile, table, writeResults } from "./harness.ts";
import { launch, processCpuSeconds, stop, type Proc } from "./processes.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const MODEL = "bench-model";
const TOKEN = "bench-token";
const CHROMIUM = "/usr/bin/chromium";

interface Args {
  concurrency: number;
  seconds: number;
  rounds: number;
  warmup: number;
  maxTokens: number;
  pollMs: number;
  speedup: number;
  browser: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { concurrency: 16, seconds: 2, rounds: 12, warmup: 8, maxTokens: 8, pollMs: 2_000, speedup: 1000, browser: true };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--no-browser") {
      a.browser = false;
      continue;
    }
    const k = argv[i]!, v = Number(argv[++i]);
    if (!(v > 0)) throw new Error(`${k} needs a positive number`);
    switch (k) {
      case "--concurrency": a.concurrency = v; break;
      case "--seconds": a.seconds = v; break;
      case "--rounds": a.rounds = v; break;
      case "--warmup": a.warmup = v; break;
      case "--max-tokens": a.maxTokens = v; break;
      case "--poll-ms": a.pollMs = v; break;
      case "--speedup": a.speedup = v; break;
      default: throw new Error(`unknown flag ${k}`);
    }
  }
  return a;
}

const SYSTEM = ["You plan freight routes across Europe. ", "You summarise clinical trial reports. ", "You answer questions about a storage engine. ", "You write release notes. "];

function chat(i: number, maxTokens: number): string {
  // Four shared system prompts (so the cache matters and decisions have candidates to weigh) and a unique question.
  return JSON.stringify({ model: MODEL, stream: true, max_tokens: maxTokens, messages: [
    { role: "system", content: SYSTEM[i % SYSTEM.length]!.repeat(40) }, { role: "user", content: `question ${i}: what changed?` },
  ] });
}

async function once(url: string, payload: string): Promise<void> {
  const res = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: payload });
  if (!res.ok) throw new Error(`kvgate answered ${res.status}: ${await res.text()}`);
  const reader = res.body!.getReader();
  while (!(await reader.read()).done);
}

let seq = 0;

/** CPU seconds (user + system) of every process whose command line mentions `marker` (Linux /proc; 0 elsewhere). */
function cpuSeconds(marker: string): number {
  let seconds = 0;
  let pids: string[] = [];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    return 0;
  }
  for (const pid of pids) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker)) continue;
    } catch {
      continue; // The process ended meanwhile.
    }
    const s = processCpuSeconds(Number(pid));
    if (Number.isFinite(s)) seconds += s;
  }
  return seconds;
}

async function window(url: string, a: Args): Promise<number> {
  const t0 = performance.now();
  const end = t0 + a.seconds * 1000;
  let done = 0;
  await Promise.all(Array.from({ length: a.concurrency }, async () => {
    while (performance.now() < end) {
      await once(url, chat(seq++, a.maxTokens));
      done++;
    }
  }));
  return (done / (performance.now() - t0)) * 1000;
}

/** Polls /v1/stats incrementally (as the page does) until `signal` fires; returns the polls made. */
async function poller(url: string, everyMs: number, signal: AbortSignal): Promise<number> {
  let since: number | undefined;
  let n = 0;
  while (!signal.aborted) {
    const res = await fetch(`${url}/v1/stats${since === undefined ? "" : `?since=${since}`}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    const s = (await res.json()) as { series: { t: number[] } };
    since = s.series.t.at(-1);
    n++;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return n;
}

async function statsCost(url: string): Promise<{ fullBytes: number; incrementalBytes: number; fullMs: number; incrementalMs: number }> {
  const time = async (q: string): Promise<[number, number]> => {
    const ms: number[] = [];
    let bytes = 0;
    for (let i = 0; i < 50; i++) {
      const t0 = performance.now();
      bytes = (await (await fetch(`${url}/v1/stats${q}`, { headers: { authorization: `Bearer ${TOKEN}` } })).text()).length;
      ms.push(performance.now() - t0);
    }
    return [bytes, percentile(ms, 50)];
  };
  const [fullBytes, fullMs] = await time("");
  const last = ((await (await fetch(`${url}/v1/stats`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { series: { t: number[] } }).series.t.at(-1);
  const [incrementalBytes, incrementalMs] = await time(`?since=${last}`);
  return { fullBytes, incrementalBytes, fullMs, incrementalMs };
}

/** The CPUs for everything but the gateway (the gateway gets CPU 0), or undefined when pinning is off or impossible. */
function restCpus(): string | undefined {
  const n = cpus().length;
  if (n < 2 || process.env.KVGATE_BENCH_NO_PIN) return undefined;
  if (spawnSync("taskset", ["-c", "0", "true"], { stdio: "ignore" }).status !== 0) return undefined;
  return n === 2 ? "1" : `1-${n - 1}`;
}

export async function main(argv: string[]): Promise<void> {
  const a = parseArgs(argv);
  const rest = restCpus();
  const procs: Proc[] = [];
  let browser: { close(): Promise<void>; newPage(): Promise<import("playwright-core").Page> } | undefined;
  let profile = "";
  try {
    const serve = [process.execPath, "--import", "tsx", "src/adapter/node/serve.ts", "--port", "0", "--host", "127.0.0.1", "--log", "warn", "--sim-workers", "0", "--admin-token", TOKEN];
    const gw = rest ? await launch("taskset", ["-c", "0", ...serve], /kvgate listening on (http:\/\/\S+)/) : await launch(serve[0]!, serve.slice(1), /kvgate listening on (http:\/\/\S+)/);
    procs.push(gw);
    // This process moves off CPU 0, and with it the engines and Chromium it starts from now on.
    if (rest) spawnSync("taskset", ["-a", "-c", "-p", rest, String(process.pid)], { stdio: "ignore" });
    for (const id of ["sim-a", "sim-b"]) {
      const sim = await launch(process.execPath, [join(ROOT, "src/adapter/node/kvgate.mjs"), "sim", "--port", "0", "--model", MODEL, "--worker-id", id, "--speedup", String(a.speedup),
        "--max-model-len", "8192", "--num-gpu-blocks", "65536", "--max-num-seqs", "512", "--events-url", `${gw.url}/admin/kv-events`, "--events-token", TOKEN],
      /serving \S+ at (http:\/\/\S+?)[,\s]/);
      procs.push(sim);
      const res = await fetch(`${gw.url}/admin/workers`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ url: sim.url, id, models: [MODEL], kv_events: true }) });
      if (res.status !== 201) throw new Error(`adding ${id}: ${res.status} ${await res.text()}`);
    }
    const modes = ["none", "poll"];
    if (a.browser && existsSync(CHROMIUM)) {
      const { chromium } = await import("playwright-core");
      profile = join(mkdtempSync(join(tmpdir(), "kvgate-bench-dashboard-")), "profile");
      browser = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM, headless: true, args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
      });
      modes.push("browser");
    } else if (a.browser) {
      console.log(`no ${CHROMIUM}: the browser mode is skipped`);
    }
    const page = browser ? await browser.newPage() : undefined;
    const load0 = loadavg();
    console.log(`kvgate ${gw.url}, 2 simulated engines; ${a.rounds} rounds × ${modes.length} modes × ${a.seconds} s at concurrency ${a.concurrency}; load average ${load0.map((x) => x.toFixed(2)).join(" ")}`);
    console.log(rest ? `the gateway runs alone on CPU 0; this client, the engines and Chromium on CPUs ${rest}` : "no CPU pinning: the raw rate also charges the other processes' CPU to the gateway");
    // The gateway's JIT takes several seconds of traffic to settle; rounds measured before that drift upwards.
    await window(gw.url, { ...a, seconds: a.warmup });
    const rps: Record<string, number[]> = Object.fromEntries(modes.map((m) => [m, []]));
    /** Requests per CPU second of the gateway, per mode and round. */
    const perCpu: Record<string, number[]> = Object.fromEntries(modes.map((m) => [m, []]));
    let polls = 0;
    /** Chromium's CPU seconds and the wall seconds of the browser windows: what the page costs the machine it runs on. */
    const browserCpu = { cpu: 0, wall: 0 };
    for (let r = 0; r < a.rounds; r++) {
      // Each round starts with another mode, so none of them always runs first.
      for (let k = 0; k < modes.length; k++) {
        const mode = modes[(r + k) % modes.length]!;
        const ac = new AbortController();
        let watching: Promise<number> | undefined;
        if (mode === "poll") watching = poller(gw.url, a.pollMs, ac.signal);
        if (mode === "browser") {
          await page!.goto(`${gw.url}/dashboard?token=${TOKEN}&poll=${a.pollMs}`);
          await page!.waitForFunction(() => Number(document.body.dataset.polls) >= 1);
        }
        const c0 = mode === "browser" ? cpuSeconds(profile) : 0;
        const g0 = processCpuSeconds(gw.child.pid);
        const t0 = performance.now();
        const rate = await window(gw.url, a);
        rps[mode]!.push(rate);
        const gwShare = (processCpuSeconds(gw.child.pid) - g0) / ((performance.now() - t0) / 1000);
        perCpu[mode]!.push(rate / gwShare);
        if (mode === "browser") {
          browserCpu.cpu += cpuSeconds(profile) - c0;
          browserCpu.wall += (performance.now() - t0) / 1000;
        }
        ac.abort();
        if (watching) polls += await watching;
        if (mode === "browser") await page!.goto("about:blank");
      }
    }
    const load1 = loadavg();
    const median = (xs: number[]): number => percentile(xs, 50);
    // Paired: each round's watched rate over the same round's unwatched one, so load that changes between rounds cancels.
    const ratios: Record<string, number[]> = Object.fromEntries(modes.map((m) => [m, rps[m]!.map((x, r) => x / rps.none![r]!)]));
    const cpuRatios: Record<string, number[]> = Object.fromEntries(modes.map((m) => [m, perCpu[m]!.map((x, r) => x / perCpu.none![r]!)]));
    const rawRatio = (m: string): number => median(ratios[m]!);
    const cpuRatio = (m: string): number => median(cpuRatios[m]!);
    // Pinned, the gateway's own cost is the per-CPU figure; unpinned, only the raw rate is meaningful.
    const usable = Number.isFinite(cpuRatio("none")) && rest !== undefined;
    const ratio = (m: string): number => (usable ? cpuRatio(m) : rawRatio(m));
    const rows = modes.map((m) => [m, median(rps[m]!).toFixed(0), rps[m]!.map((x) => x.toFixed(0)).join(" "), rawRatio(m).toFixed(3),
      median(perCpu[m]!).toFixed(0), cpuRatio(m).toFixed(3), m === "none" ? "" : `${((1 - ratio(m)) * 100).toFixed(1)}%`]);
    console.log("\n" + table(["mode", "req/s (median)", "per round", "raw ratio", "req per gateway CPU s", "per-CPU ratio", "cost"], rows));
    const cost = await statsCost(gw.url);
    console.log(`\n/v1/stats: full ${(cost.fullBytes / 1024).toFixed(1)} KiB in ${cost.fullMs.toFixed(2)} ms, incremental ${(cost.incrementalBytes / 1024).toFixed(1)} KiB in ${cost.incrementalMs.toFixed(2)} ms (client-side p50, loopback)`);
    // The bound that noise cannot blur: one incremental poll's whole round trip per poll period, as a share of one core.
    const bound = cost.incrementalMs / a.pollMs;
    console.log(`per-poll bound: ${cost.incrementalMs.toFixed(2)} ms every ${a.pollMs} ms = ${(bound * 100).toFixed(2)}% of one core`);
    if (browserCpu.wall > 0) console.log(`headless Chromium with the page open: ${((browserCpu.cpu / browserCpu.wall) * 100).toFixed(1)}% of one core (on this machine, beside the gateway)`);
    const verdicts = modes.filter((m) => m !== "none").map((m) =>
      `${m}: ${((1 - ratio(m)) * 100).toFixed(1)}% of ${usable ? "the gateway's throughput per CPU second" : "throughput"} (target < 5%) ${ratio(m) >= 0.95 ? "MET" : "MISSED"}`);
    console.log(verdicts.join("\n"));
    console.log(`load average ${load0.map((x) => x.toFixed(2)).join(" ")} → ${load1.map((x) => x.toFixed(2)).join(" ")}`);
    console.log(`\nwrote ${writeResults("dashboard", { args: a, modes, rps, median: Object.fromEntries(modes.map((m) => [m, median(rps[m]!)])), ratio: Object.fromEntries(modes.map((m) => [m, ratio(m)])), ratios, pinned: rest ?? null, perCpu, cpuRatios,
      rawRatio: Object.fromEntries(modes.map((m) => [m, rawRatio(m)])), cpuRatio: Object.fromEntries(modes.map((m) => [m, cpuRatio(m)])), pollBound: bound, browserCpuShare: browserCpu.wall > 0 ? browserCpu.cpu / browserCpu.wall : null, polls, stats: cost, loadavg: { before: load0, after: load1 } })}`);
  } finally {
    await browser?.close();
    for (const p of procs) stop(p);
    if (profile) rmSync(dirname(profile), { recursive: true, force: true });
  }
}
