/**
 * @module Disaggregated serving through kvgate, SGLang flow (bootstrap_host/port/room to both legs at once), against
 * simulated prefill and decode engines over loopback HTTP — one prefill engine in a process of its own: streaming end
 * to end with the transferred prefix cached, the same 63-bit room on both legs, KV-aware prefill placement, a
 * failing prefill leg retried on another prefill worker or ending in a clean error, and bookings released on abort.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/sim/sim-clock.ts";
import { start, waitForOutput } from "../conformance/processes.ts";
import { ROOT } from "../conformance/runtimes.ts";
import { post, sseData, TOKEN } from "./helpers.ts";
import { closeDeadWorkers, deadWorker, MODEL, noBookings, pdFleet, series, until, type PdFleet } from "./disagg-fleet.ts";

let fleet: PdFleet | undefined;
afterEach(async () => {
  await fleet?.close();
  fleet = undefined;
  await closeDeadWorkers();
});

const text = (tag: string, n = 40) => `${tag}: ${"A long shared system prompt for the agent to reuse. ".repeat(n)}`;
const streamed = (content: string, extra: Record<string, unknown> = {}) =>
  ({ model: MODEL, prompt: content, max_tokens: 5, stream: true, stream_options: { include_usage: true }, ...extra });

async function stream(f: PdFleet, content: string): Promise<{ headers: Headers; usage: Record<string, any> }> {
  const res = await post(`${f.gw.url}/v1/completions`, streamed(content));
  expect(res.status).toBe(200);
  const events = await sseData(res);
  expect(events.at(-1)).toBe("[DONE]");
  return { headers: res.headers, usage: JSON.parse(events.at(-2)!).usage };
}

const transferred = (promptTokens: number) => Math.floor((promptTokens - 1) / 16) * 16;
const rooms = (bodies: string[]) => bodies.map((b) => b.match(/"bootstrap_room":(\d+)/)?.[1]);

describe("SGLang flow through kvgate", () => {
  it("should send both legs the prefill worker's bootstrap address and one 63-bit room, and stream the decode with the KV transferred", async () => {
    fleet = await pdFleet(["--disaggregation", "sglang"]);
    const f = fleet;
    const a = await stream(f, text("A"));
    expect(a.headers.get("x-kvgate-prefill")).toBe("remote");
    const pa = a.headers.get("x-kvgate-prefill-worker")!;
    expect(a.usage.prompt_tokens_details.cached_tokens).toBe(transferred(a.usage.prompt_tokens));
    const p = f.prefill.find((s) => s.url === f.gw.gateway.state.fleet.get(pa)!.url)!;
    const d = f.decode.find((s) => s.url === f.gw.gateway.state.fleet.get(a.headers.get("x-kvgate-worker")!)!.url)!;
    const [pre, dec] = [f.sent.find((r) => r.url.startsWith(p.url))!.body, f.sent.find((r) => r.url.startsWith(d.url))!.body];
    const [roomP, roomD] = rooms([pre, dec]);
    expect(roomP).toBeDefined();
    expect(roomP).toBe(roomD);
    expect(BigInt(roomP!) < 2n ** 63n).toBe(true);
    expect(JSON.parse(pre)).toMatchObject({ bootstrap_host: "127.0.0.1", bootstrap_port: p.port, stream: false });
    expect(JSON.parse(dec)).toMatchObject({ bootstrap_host: "127.0.0.1", bootstrap_port: p.port, stream: true, max_tokens: 5 });

    // KV-aware prefill placement works the same in this flow.
    await until(() => f.gw.gateway.state.index.stats().entries > 0, 5_000, "KV events");
    const b = await stream(f, text("B"));
    expect(b.headers.get("x-kvgate-prefill-worker")).not.toBe(pa);
    await new Promise((r) => setTimeout(r, 30));
    expect((await stream(f, text("A"))).headers.get("x-kvgate-prefill-worker")).toBe(pa);

    const m = await f.metrics();
    expect(series(m, "kvgate_disagg_prefill_total", { flow: "sglang", prefill: "remote", reason: "unconditional" })).toBe(3);
    // The prefill legs' usage is the actual hit: A and B cold, A again cached (the decodes count transferred KV cached).
    expect(series(m, "kvgate_predicted_hit_rate_count")).toBe(3);
    expect(series(m, "kvgate_actual_hit_rate_count")).toBe(3);
    expect(series(m, "kvgate_actual_hit_rate_sum")).toBeGreaterThan(0.5);
    expect(series(m, "kvgate_actual_hit_rate_sum")).toBeLessThan(1.5);
    expect(noBookings(f)).toBe(true);
    for (const s of f.prefill) expect(s.engine.cache.usedBlocks).toBe(0);
  });

  it("should retry the pair on another prefill worker when one is unreachable, and end in a clean error when none is left", async () => {
    const dead = await deadWorker();
    fleet = await pdFleet(["--disaggregation", "sglang", "--health-probe-ms", "0"], { prefill: 1, decode: 1, extraPrefillUrls: [dead.url] });
    const f = fleet;
    // Whichever prefill worker is tried first, the request succeeds.
    for (let i = 0; i < 3; i++) {
      const r = await stream(f, text(`R${i}`));
      expect(r.headers.get("x-kvgate-prefill-worker")).toBe("p0");
      expect(r.usage.prompt_tokens_details.cached_tokens).toBe(transferred(r.usage.prompt_tokens));
    }
    expect(noBookings(f)).toBe(true);
    await f.close();

    fleet = await pdFleet(["--disaggregation", "sglang", "--health-probe-ms", "0"], { prefill: 0, decode: 1, extraPrefillUrls: [dead.url] });
    const res = await post(`${fleet.gw.url}/v1/completions`, streamed(text("E")));
    expect(res.status).toBe(502);
    const err = (await res.json()).error;
    expect(err.message).toMatch(/prefill worker px0/);
    expect(noBookings(fleet)).toBe(true);
    // The decode leg was stopped with its prefill: nothing is left waiting in the decode engine.
    await until(() => fleet!.decode[0]!.engine.idle, 5_000, "the decode engine to be idle");
  });

  it("should retry the pair when the decode worker is unreachable, stopping the prefill it started", async () => {
    const dead = await deadWorker();
    // A prefill that finished before kvgate stopped it keeps its room's KV for the decode that never comes, as an
    // engine does until its transfer timeout; a short one lets the engine settle whichever side won the race.
    fleet = await pdFleet(["--disaggregation", "sglang", "--health-probe-ms", "0"], { prefill: 1, decode: 1, extraDecodeUrls: [dead.url], prefillOpts: { kvTransferTimeoutMs: 300 } });
    for (let i = 0; i < 3; i++) {
      const r = await stream(fleet, text(`D${i}`));
      expect(r.headers.get("x-kvgate-worker")).toBe("d0");
      expect(r.usage.prompt_tokens_details.cached_tokens).toBe(transferred(r.usage.prompt_tokens));
    }
    expect(noBookings(fleet)).toBe(true);
    await until(() => fleet!.prefill[0]!.engine.idle && fleet!.prefill[0]!.engine.cache.usedBlocks === 0, 5_000, "the prefill engine to settle");
  });

  it("should stop both legs and free both bookings when the client leaves while the prefill runs", async () => {
    const clock = new VirtualClock();
    fleet = await pdFleet(["--disaggregation", "sglang"], { prefill: 1, decode: 1, prefillOpts: { clock } });
    const f = fleet;
    const ctl = new AbortController();
    const gone = post(`${f.gw.url}/v1/completions`, streamed(text("gone")), {}, ctl.signal).catch((e) => e);
    await until(() => f.gw.gateway.state.router.liveBookings === 2 && f.prefill[0]!.engine.waiting + f.prefill[0]!.engine.running > 0, 5_000, "both legs");
    ctl.abort();
    await gone;
    await until(() => noBookings(f) && f.prefill[0]!.engine.idle, 5_000, "both bookings and the prefill request to be released");
    expect(f.decode[0]!.engine.idle).toBe(true);
  });

  it("should serve with a prefill engine in a process of its own", async () => {
    fleet = await pdFleet(["--disaggregation", "sglang"], { prefill: 0, decode: 1 });
    const f = fleet;
    const proc = start(process.execPath, [
      join(ROOT, "src/adapter/node/kvgate.mjs"), "sim", "--port", "0", "--model", MODEL, "--worker-id", "pp", "--role", "prefill", "--speedup", "50",
      "--events-url", `${f.gw.url}/admin/kv-events`, "--events-token", TOKEN, "--events-flush-ms", "5",
    ], { cwd: ROOT });
    try {
      const url = (await waitForOutput(proc, /serving \S+ at (http:\/\/\S+?),/))[1]!;
      await f.gw.gateway.state.fleet.add({ url, id: "pp", models: [MODEL], role: "prefill", kvEvents: true, blockSize: 16, bootstrapPort: Number(new URL(url).port) });
      const r = await stream(f, text("process"));
      expect(r.headers.get("x-kvgate-prefill-worker")).toBe("pp");
      expect(r.usage.prompt_tokens_details.cached_tokens).toBe(transferred(r.usage.prompt_tokens));
      await until(() => f.gw.gateway.state.index.treeSizeOfSlot(f.gw.gateway.state.index.slotFor("pp", 0)) > 0, 5_000, "the prefill process's KV events");
    } finally {
      await proc.stop();
    }
  }, 60_000);
});
