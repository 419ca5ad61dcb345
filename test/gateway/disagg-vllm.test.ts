/**
 * @module Disaggregated serving through kvgate, vLLM flow (kv_transfer_params), against simulated prefill and decode
 * engines over loopback HTTP: streaming end to end with the decode reporting the transferred prefix as cached,
 * KV-aware prefill placement, conditional disaggregation (small uncached part, busy prefill pool, no prefill
 * worker) visible in /metrics, the prefill-failure fallback, and bookings released on completion and client abort.
 */
import { afterEach, describe, expect, it } from "vitest";
import { startSimServer } from "../../src/adapter/node/sim-server.ts";
import { VirtualClock } from "../../src/sim/sim-clock.ts";
import { post, sseData } from "./helpers.ts";
import { closeDeadWorkers, deadWorker, MODEL, noBookings, pdFleet, series, until, type PdFleet } from "./disagg-fleet.ts";

let fleet: PdFleet | undefined;
afterEach(async () => {
  await fleet?.close();
  fleet = undefined;
  await closeDeadWorkers();
});

const text = (tag: string, n = 40) => `${tag}: ${"Shared context for a long conversation about routing. ".repeat(n)}`;
const chat = (content: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 6, ...extra });
const streamed = (content: string) => chat(content, { stream: true, stream_options: { include_usage: true } });

/** Streams one chat through kvgate; returns its headers, usage and text. */
async function stream(f: PdFleet, content: string): Promise<{ headers: Headers; usage: Record<string, any>; text: string }> {
  const res = await post(`${f.gw.url}/v1/chat/completions`, streamed(content));
  expect(res.status).toBe(200);
  const events = await sseData(res);
  expect(events.at(-1)).toBe("[DONE]");
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
  return { headers: res.headers, usage: chunks.at(-1).usage, text: chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("") };
}

const transferred = (promptTokens: number) => Math.floor((promptTokens - 1) / 16) * 16;
const indexed = (f: PdFleet, worker: string) => f.gw.gateway.state.index.treeSizeOfSlot(f.gw.gateway.state.index.slotFor(worker, 0));

describe("vLLM flow through kvgate", () => {
  it("should stream from the decode worker with the prefill's KV transferred, and send each prompt's prefill where its prefix is cached", async () => {
    fleet = await pdFleet(["--disagg-local-prefill-below", "0"]);
    const f = fleet;
    const a = await stream(f, text("A"));
    expect(a.headers.get("x-kvgate-prefill")).toBe("remote");
    const pa = a.headers.get("x-kvgate-prefill-worker")!;
    expect(["p0", "p1"]).toContain(pa);
    expect(a.headers.get("x-kvgate-worker")).toMatch(/^d[01]$/);
    expect(a.usage.completion_tokens).toBe(6);
    expect(a.usage.prompt_tokens_details.cached_tokens).toBe(transferred(a.usage.prompt_tokens));
    expect(a.usage.prompt_tokens).toBeGreaterThan(200);

    // What kvgate sent: a one-token, non-streamed prefill asking for remote decode, then the original request with the
    // prefill's kv_transfer_params copied unchanged.
    const p = f.prefill.find((s) => s.url === f.gw.gateway.state.fleet.get(pa)!.url)!;
    const [pre] = f.sentTo(p);
    expect(pre).toMatchObject({ max_tokens: 1, stream: false, kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null } });
    expect(pre!.stream_options).toBeUndefined();
    const d = f.decode.find((s) => s.url === f.gw.gateway.state.fleet.get(a.headers.get("x-kvgate-worker")!)!.url)!;
    const [dec] = f.sentTo(d);
    expect(dec).toMatchObject({ stream: true, max_tokens: 6, kv_transfer_params: { do_remote_prefill: true, remote_host: "127.0.0.1", remote_port: p.port } });

    // The prefill engine's KV events reached the index: a different prompt goes to the other (emptier) prefill worker,
    // and each repeat goes back to the prefill worker holding its prefix.
    await until(() => indexed(f, pa) > 0, 5_000, "prefill KV events");
    const b = await stream(f, text("B"));
    const pb = b.headers.get("x-kvgate-prefill-worker")!;
    expect(pb).not.toBe(pa);
    await until(() => indexed(f, pb) > 0, 5_000, "prefill KV events");
    for (const [content, worker] of [[text("A"), pa], [text("B"), pb], [text("A"), pa]] as const) {
      const r = await stream(f, content);
      expect(r.headers.get("x-kvgate-prefill-worker")).toBe(worker);
      expect(r.usage.prompt_tokens_details.cached_tokens).toBe(transferred(r.usage.prompt_tokens));
    }
    // The decode engines hold what was transferred to them and said so: the index knows blocks on decode workers too.
    await until(() => indexed(f, "d0") + indexed(f, "d1") > 0, 5_000, "decode KV events");

    const m = await f.metrics();
    expect(series(m, "kvgate_disagg_prefill_total", { flow: "vllm", prefill: "remote", reason: "unconditional" })).toBe(5);
    expect(series(m, "kvgate_disagg_leg_seconds_count", { leg: "prefill" })).toBe(5);
    // One predicted and one actual hit per request, both the prefill leg's: A and B came cold, the three repeats hit.
    // (The decode workers report the transferred KV as cached: counted, every request would look like a hit.)
    expect(series(m, "kvgate_predicted_hit_rate_count")).toBe(5);
    expect(series(m, "kvgate_actual_hit_rate_count")).toBe(5);
    expect(series(m, "kvgate_actual_hit_rate_sum")).toBeGreaterThan(2);
    expect(series(m, "kvgate_actual_hit_rate_sum")).toBeLessThan(3.5);
    expect(noBookings(f)).toBe(true);
    // Every prefill engine released the blocks it kept once the decode read them.
    for (const s of f.prefill) expect(s.engine.cache.usedBlocks).toBe(0);
  });

  it("should prefill locally when little is uncached on the decode worker, or when no prefill worker is healthy", async () => {
    fleet = await pdFleet(["--disagg-local-prefill-below", "128"], { prefill: 1, decode: 1 });
    const f = fleet;
    const short = await stream(f, "A short question.");
    expect(short.headers.get("x-kvgate-prefill")).toBe("local");
    expect(short.headers.get("x-kvgate-prefill-reason")).toBe("small_uncached");
    expect(f.sentTo(f.prefill[0]!)).toHaveLength(0);

    await until(() => indexed(f, "d0") > 0, 5_000, "decode KV events");
    const before = indexed(f, "d0");
    const long = await stream(f, text("L"));
    expect(long.headers.get("x-kvgate-prefill")).toBe("remote");
    expect(long.headers.get("x-kvgate-prefill-reason")).toBe("uncached_tokens");
    // The decode worker now caches the transferred prompt, so a repeat has little left to compute there: local.
    await until(() => indexed(f, "d0") >= before + transferred(long.usage.prompt_tokens) / 16, 5_000, "decode KV events");
    const again = await stream(f, text("L"));
    expect(again.headers.get("x-kvgate-prefill-reason")).toBe("small_uncached");
    expect(again.usage.prompt_tokens_details.cached_tokens).toBe(transferred(again.usage.prompt_tokens));

    f.gw.gateway.state.fleet.setHealth("p0", "draining");
    const noPrefill = await stream(f, text("M"));
    expect(noPrefill.headers.get("x-kvgate-prefill-reason")).toBe("no_prefill_workers");
    expect(noPrefill.usage.prompt_tokens_details.cached_tokens).toBe(0);

    const m = await f.metrics();
    expect(series(m, "kvgate_disagg_prefill_total", { flow: "vllm", prefill: "local", reason: "small_uncached" })).toBe(2);
    expect(series(m, "kvgate_disagg_prefill_total", { flow: "vllm", prefill: "remote", reason: "uncached_tokens" })).toBe(1);
    expect(series(m, "kvgate_disagg_prefill_total", { flow: "vllm", prefill: "local", reason: "no_prefill_workers" })).toBe(1);
    expect(noBookings(f)).toBe(true);
    // A preview of a disaggregated model shows its decode worker, where the client's stream would come from.
    const preview = await (await post(`${f.gw.url}/v1/route`, chat(text("L")))).json();
    expect(preview).toMatchObject({ worker: "d0" });
    expect(preview.cached_tokens).toBeGreaterThan(0);
  });

  it("should prefill locally while the prefill pool is busy, and free the prefill booking when the client leaves mid-prefill", async () => {
    // The prefill engine runs on a clock the test moves: its prefill stays in flight until then.
    const clock = new VirtualClock();
    fleet = await pdFleet(["--disagg-local-prefill-below", "0", "--disagg-prefill-busy-frac", "0.01"], { prefill: 1, decode: 1, prefillOpts: { clock } });
    const f = fleet;
    const router = f.gw.gateway.state.router;
    const slow = post(`${f.gw.url}/v1/chat/completions`, streamed(text("slow", 60)));
    await until(() => router.snapshot().ranks.some((r) => r.worker === "p0" && r.activePrefillTokens > 0), 5_000, "the prefill booking");
    // p0 holds far more than 1% of its 8192-token batch in prefill: the next request is prefilled on the decode worker.
    const busy = await stream(f, text("other"));
    expect(busy.headers.get("x-kvgate-prefill-reason")).toBe("prefill_busy");
    clock.advance(60_000);
    const res = await slow;
    expect(res.headers.get("x-kvgate-prefill")).toBe("remote");
    const events = await sseData(res);
    expect(JSON.parse(events.at(-2)!).usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);

    // A client that leaves while its prefill is in flight: the prefill booking is cancelled and the engine request aborted.
    const ctl = new AbortController();
    const gone = post(`${f.gw.url}/v1/chat/completions`, streamed(text("gone", 50)), {}, ctl.signal).catch((e) => e);
    await until(() => f.prefill[0]!.engine.waiting + f.prefill[0]!.engine.running > 0, 5_000, "the prefill to reach the engine");
    expect(router.liveBookings).toBe(1);
    ctl.abort();
    await gone;
    await until(() => noBookings(f) && f.prefill[0]!.engine.idle, 5_000, "bookings and the engine request to be released");
    expect(series(await f.metrics(), "kvgate_disagg_prefill_total", { flow: "vllm", prefill: "local", reason: "prefill_busy" })).toBe(1);
  });

  it("should release the decode booking when the client leaves mid-stream", async () => {
    fleet = await pdFleet(["--disagg-local-prefill-below", "0"], { prefill: 1, decode: 1, decodeOpts: { speedupRatio: 1 } });
    const f = fleet;
    const ctl = new AbortController();
    const res = await post(`${f.gw.url}/v1/chat/completions`, chat(text("abort"), { stream: true, max_tokens: 500 }), {}, ctl.signal);
    expect(res.headers.get("x-kvgate-prefill")).toBe("remote");
    const reader = res.body!.getReader();
    await reader.read();
    expect(f.gw.gateway.state.router.liveBookings).toBe(1);
    ctl.abort();
    await reader.read().catch(() => undefined);
    await until(() => noBookings(f) && f.decode[0]!.engine.idle, 5_000, "the decode booking and engine request to be released");
    expect(f.prefill[0]!.engine.cache.usedBlocks).toBe(0);
  });

  it("should fall back to local prefill when the prefill worker is unreachable or is not a KV producer", async () => {
    const dead = await deadWorker();
    // An engine without a KV connector ignores kv_transfer_params and answers without them.
    const plain = await startSimServer({ model: MODEL, role: "aggregated" });
    try {
      for (const url of [dead.url, plain.url]) {
        fleet = await pdFleet(["--disagg-local-prefill-below", "0", "--health-probe-ms", "0"], { prefill: 0, decode: 1, extraPrefillUrls: [url] });
        const r = await stream(fleet, text("fallback"));
        expect(r.headers.get("x-kvgate-prefill")).toBe("local");
        expect(r.headers.get("x-kvgate-prefill-reason")).toBe("prefill_failed");
        expect(r.text.length).toBeGreaterThan(0);
        const m = await fleet.metrics();
        expect(series(m, "kvgate_disagg_prefill_total", { flow: "vllm", prefill: "local", reason: "prefill_failed" })).toBe(1);
        expect(series(m, "kvgate_upstream_failures_total", { kind: url === dead.url ? "connect" : "status" })).toBe(1);
        expect(noBookings(fleet)).toBe(true);
        await fleet.close();
        fleet = undefined;
      }
    } finally {
      await plain.close();
    }
  });

  it("should retry the decode leg on another decode worker with the same transfer parameters when one is unreachable", async () => {
    const dead = await deadWorker();
    fleet = await pdFleet(["--disagg-local-prefill-below", "0", "--health-probe-ms", "0"], { prefill: 1, decode: 1, extraDecodeUrls: [dead.url] });
    for (let i = 0; i < 3; i++) {
      const r = await stream(fleet, text(`D${i}`));
      expect(r.headers.get("x-kvgate-worker")).toBe("d0");
      expect(r.usage.prompt_tokens_details.cached_tokens).toBe(transferred(r.usage.prompt_tokens));
    }
    expect(noBookings(fleet)).toBe(true);
    expect(fleet.prefill[0]!.engine.cache.usedBlocks).toBe(0);
  });

  it("should pass a request the prefill worker rejects (4xx) back to the client", async () => {
    fleet = await pdFleet(["--disagg-local-prefill-below", "0"], { prefill: 1, decode: 1 });
    const res = await post(`${fleet.gw.url}/v1/chat/completions`, chat("x", { n: 3 }));
    expect(res.status).toBe(400);
    expect((await res.json()).error.message).toMatch(/n = 1/);
    expect(fleet.sentTo(fleet.decode[0]!)).toHaveLength(0);
    expect(noBookings(fleet)).toBe(true);
  });
});
