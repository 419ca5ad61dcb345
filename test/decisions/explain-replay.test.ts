/**
 * @module Acceptance 3 of issue 17: a gateway in front of simulated engines (HTTP, KV events pushed back) logs 2,000
 * booked decisions with --decision-log (rotated across files); `kvgate explain` replays every one through the WASM
 * core with 0 mismatches, and reports a mismatch (exit 1) once a logged load or hash is altered.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimServer } from "../../src/adapter/node/sim-server.ts";
import { openDecisionLogFile } from "../../src/adapter/node/decision-log-file.ts";
import { runCli } from "../../src/cli/main.ts";
import { parseDecisionLine, type LoggedDecision } from "../../src/decisions/decision-log-format.ts";
import { createPrng } from "../../src/routing/prng.ts";
import { post, startSim, startTestGateway, type TestGateway } from "../gateway/helpers.ts";

const MODEL = "sim-model";
const DECISIONS = 2000;
const dir = mkdtempSync(join(tmpdir(), "kvgate-decisions-"));
const log = join(dir, "decisions.jsonl");
let gw: TestGateway;
const sims: SimServer[] = [];

/** Seeded traffic: 24 prefix families of varying length, unique tails, a few tenants, pinned and sampled requests. */
function requestBody(i: number, rand: () => number): Record<string, unknown> {
  const family = Math.floor(rand() * 24);
  const words = 40 + family * 9;
  const prefix = Array.from({ length: words }, (_, k) => `f${family}w${k}`).join(" ");
  const body: Record<string, unknown> = { model: MODEL, prompt: `${prefix} request ${i} ${"tail ".repeat(Math.floor(rand() * 30))}`, max_tokens: 1 + Math.floor(rand() * 3) };
  const r = rand();
  if (r < 0.1) body.cache_salt = `tenant-${family % 3}`;
  else if (r < 0.13) body.kvgate = { worker_id: `e${i % 4}` };
  else if (r < 0.2) body.kvgate = { temperature: 0.5 };
  else if (r < 0.25) body.kvgate = { overlap_weight: 3 };
  return body;
}

beforeAll(async () => {
  gw = await startTestGateway(["--decision-log", log, "--decision-log-max-bytes", String(1 << 20), "--decision-log-keep", "50", "--decision-log-tokens"],
    { decisionLog: openDecisionLogFile });
  for (let i = 0; i < 4; i++) {
    const s = await startSim(gw.url, { model: MODEL, workerId: `e${i}`, numGpuBlocks: 256 });
    sims.push(s);
    await gw.gateway.state.fleet.add({ url: s.url, id: `e${i}`, models: [MODEL], kvEvents: true, blockSize: 16 });
  }
  const rand = createPrng(17);
  const bodies = Array.from({ length: DECISIONS }, (_, i) => requestBody(i, rand));
  let next = 0;
  // 12 clients at once: load builds up, so cost sometimes sends a prompt away from its cache.
  await Promise.all(Array.from({ length: 12 }, async () => {
    while (next < bodies.length) {
      const res = await post(`${gw.url}/v1/completions`, bodies[next++]);
      if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    }
  }));
  await Promise.allSettled(sims.map((s) => s.close()));
  await gw.close();
  // The listener is closed; closing the gateway writes out the decision log's buffered lines.
  await gw.gateway.close();
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function files(): string[] {
  const rotated = readdirSync(dir).filter((f) => /^decisions\.jsonl\.\d+$/.test(f)).sort((a, b) => Number(b.split(".").pop()) - Number(a.split(".").pop()));
  return [...rotated.map((f) => join(dir, f)), log];
}

async function explain(paths: string[], extra: string[] = []): Promise<{ code: number; out: string }> {
  let out = "";
  const code = await runCli(["explain", "--decisions", paths.join(","), ...extra], { stdin: () => "", write: (t) => void (out += t), readText: (p) => readFileSync(p, "utf8") });
  return { code, out };
}

function lines(paths: string[]): LoggedDecision[] {
  return paths.flatMap((p) => readFileSync(p, "utf8").split("\n").filter((l) => l !== "").map((l, i) => parseDecisionLine(l, `${p}:${i + 1}`)));
}

describe("decision log + kvgate explain", () => {
  it("logs every booked decision, rotated under the size bound", () => {
    const paths = files();
    expect(paths.length).toBeGreaterThan(1);
    for (const p of paths) expect(readFileSync(p).length).toBeLessThanOrEqual(1 << 20);
    const all = lines(paths);
    expect(all).toHaveLength(DECISIONS);
    expect(new Set(all.map((d) => d.request_id)).size).toBe(DECISIONS);
    expect(all.some((d) => d.candidates.length === 0)).toBe(true);
    expect(all.some((d) => d.namespace !== undefined)).toBe(true);
    expect(all.some((d) => d.temperature > 0)).toBe(true);
    expect(all.some((d) => d.tie === "rendezvous")).toBe(true);
    expect(all.filter((d) => d.overlap_blocks > 0).length).toBeGreaterThan(DECISIONS / 4);
  });

  it("replays all 2,000 with 0 mismatches and summarises them", async () => {
    const { code, out } = await explain(files());
    expect(out).toContain(`${DECISIONS} decisions`);
    expect(out).toContain("0 mismatches");
    expect(code).toBe(0);
    const json = JSON.parse((await explain(files(), ["--json"])).out) as { decisions: number; mismatched: number; contested: number; loadOverrodeCache: number; workers: Record<string, number> };
    expect(json.decisions).toBe(DECISIONS);
    expect(json.mismatched).toBe(0);
    expect(Object.values(json.workers).reduce((a, b) => a + b, 0)).toBe(DECISIONS);
    expect(Object.keys(json.workers).sort()).toEqual(["e0#0", "e1#0", "e2#0", "e3#0"]);
    expect(json.loadOverrodeCache).toBeLessThanOrEqual(json.contested);
  });

  it("reports a decision whose logged load was altered, and exits 1", async () => {
    const all = lines([log]);
    const at = all.findIndex((d) => d.candidates.length > 1 && d.policy === "kv" && d.temperature === 0);
    const d = all[at]!;
    const row = d.candidates.findIndex((c) => c[0] === d.worker);
    // The chosen worker suddenly held far more prefill: the replay prefers another one.
    d.candidates[row]![3] += 1_000_000;
    const altered = join(dir, "altered-load.jsonl");
    writeFileSync(altered, all.map((x) => JSON.stringify(x)).join("\n") + "\n");
    const { code, out } = await explain([altered]);
    expect(code).toBe(1);
    expect(out).toContain("1 decisions came out differently");
    expect(out).toContain(`${altered}:${at + 1} request ${d.request_id}: worker: logged ${d.worker}#0`);
    expect(out).toContain("candidate_cost");
  });

  it("reports a decision whose logged block hash no longer matches its tokens", async () => {
    const all = lines([log]);
    const at = all.findIndex((d) => d.prompt_blocks > 2);
    const d = all[at]!;
    d.hashes = d.hashes.slice(0, 16) + (d.hashes[16] === "0" ? "1" : "0") + d.hashes.slice(17);
    const altered = join(dir, "altered-hash.jsonl");
    writeFileSync(altered, all.map((x) => JSON.stringify(x)).join("\n") + "\n");
    const { code, out } = await explain([altered]);
    expect(code).toBe(1);
    expect(out).toMatch(new RegExp(`request ${d.request_id}: hashes: logged block 1: `));
  });

  it("refuses a malformed log with a clear message (exit 2)", async () => {
    const bad = join(dir, "bad.jsonl");
    writeFileSync(bad, '{"v":1,"at":0}\n');
    const { code, out } = await explain([bad]);
    expect(code).toBe(2);
    expect(out).toContain(`${bad}:1: overlap_weight must be a number`);
    expect((await explain([])).code).toBe(2);
  });
});
