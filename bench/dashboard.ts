/**
 * @module `npm run bench -- dashboard`: issue 17 acceptance 4 — what watching costs. kvgate (Node, a real process)
 * routes streamed chats to two simulated engines (their own process each, KV events pushed to kvgate) while closed-loop
 * clients measure completed requests/s in three modes taking turns round by round, so machine drift hits all alike:
 *   - none:    nobody watches;
 *   - poll:    a client polls GET /v1/stats?since= as the page does (every --poll-ms, default the page's 2 s);
 *   - browser: the real /dashboard open in headless Chromium (Debian's /usr/bin/chromium; skipped without it).
 * The median over rounds of each watched mode's rate over the same round's `none` is its ratio (target: a cost under
 * 5%, i.e. ratio ≥ 0.95), beside the bound one poll's round trip per period puts on it. Measured and
 * reported, never asserted. Also prints the size and server time of one full and one incremental /v1/stats.
 *
 * Flags: --concurrency N (16)  --seconds S (2)  --rounds N (10)  --max-tokens N (8)  --poll-ms N (2000)  --speedup X (1000)
 *        --no-browser
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { percentile, table, writeResults } from "./harness.ts";
import { launch, stop, type Proc } from "./processes.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const MODEL = "bench-model";
const TOKEN = "bench-token";
const CHROMIUM = "/usr/bin/chromium";

interface Args {
  concurrency: number;
  seconds: number;
  rounds: number;
  maxTokens: number;
  pollMs: number;
  speedup: number;
  browser: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { concurrency: 16, seconds: 2, rounds: 10, maxTokens: 8, pollMs: 2_000, speedup: 1000, browser: true };
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
  let ticks = 0;
  let pids: string[] = [];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    return 0;
  }
  for (const pid of pids) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker)) continue;
      const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      // utime and stime, fields 14 and 15 of stat (11 and 12 after the command name), in clock ticks (100 per s on Linux).
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // The process ended meanwhile.
    }
  }
  return ticks / 100;
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

export async function main(argv: string[]): Promise<void> {
  const a = parseArgs(argv);
  const procs: Proc[] = [];
  let browser: { close(): Promise<void>; newPage(): Promise<import("playwright-core").Page> } | undefined;
  let profile = "";
  try {
    const gw = await launch(process.execPath, ["--import", "tsx", "src/adapter/node/serve.ts", "--port", "0", "--host", "127.0.0.1", "--log", "warn", "--sim-workers", "0", "--admin-token", TOKEN],
      /kvgate listening on (http:\/\/\S+)/);
    procs.push(gw);
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
    await window(gw.url, { ...a, seconds: 1 });
    const rps: Record<string, number[]> = Object.fromEntries(modes.map((m) => [m, []]));
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
        const t0 = performance.now();
        rps[mode]!.push(await window(gw.url, a));
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
    const ratio = (m: string): number => median(ratios[m]!);
    const rows = modes.map((m) => [m, median(rps[m]!).toFixed(0), rps[m]!.map((x) => x.toFixed(0)).join(" "), ratio(m).toFixed(3),
      m === "none" ? "" : `${((1 - ratio(m)) * 100).toFixed(1)}%`]);
    console.log("\n" + table(["mode", "req/s (median)", "per round", "ratio to none (median of rounds)", "cost"], rows));
    const cost = await statsCost(gw.url);
    console.log(`\n/v1/stats: full ${(cost.fullBytes / 1024).toFixed(1)} KiB in ${cost.fullMs.toFixed(2)} ms, incremental ${(cost.incrementalBytes / 1024).toFixed(1)} KiB in ${cost.incrementalMs.toFixed(2)} ms (client-side p50, loopback)`);
    // The bound that noise cannot blur: one incremental poll's whole round trip per poll period, as a share of one core.
    const bound = cost.incrementalMs / a.pollMs;
    console.log(`per-poll bound: ${cost.incrementalMs.toFixed(2)} ms every ${a.pollMs} ms = ${(bound * 100).toFixed(2)}% of one core`);
    if (browserCpu.wall > 0) console.log(`headless Chromium with the page open: ${((browserCpu.cpu / browserCpu.wall) * 100).toFixed(1)}% of one core (on this machine, beside the gateway)`);
    const verdicts = modes.filter((m) => m !== "none").map((m) =>
      `${m}: ${((1 - ratio(m)) * 100).toFixed(1)}% of throughput (target < 5%) ${ratio(m) >= 0.95 ? "MET" : "MISSED"}`);
    console.log(verdicts.join("\n"));
    console.log(`load average ${load0.map((x) => x.toFixed(2)).join(" ")} → ${load1.map((x) => x.toFixed(2)).join(" ")}`);
    console.log(`\nwrote ${writeResults("dashboard", { args: a, modes, rps, median: Object.fromEntries(modes.map((m) => [m, median(rps[m]!)])), ratio: Object.fromEntries(modes.map((m) => [m, ratio(m)])), ratios, pollBound: bound, browserCpuShare: browserCpu.wall > 0 ? browserCpu.cpu / browserCpu.wall : null, polls, stats: cost, loadavg: { before: load0, after: load1 } })}`);
  } finally {
    await browser?.close();
    for (const p of procs) stop(p);
  }
}
