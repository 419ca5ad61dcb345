/**
 * @module Disaggregated serving in the simulated engine, engine to engine over loopback HTTP: the vLLM flow (prefill
 * keeps its blocks and answers kv_transfer_params, decode reads them and reports them as cached, holds them and
 * publishes them), the SGLang flow (rendezvous in a bootstrap room, in either arrival order, and a decode that times
 * out when its prefill never comes), and the staging rules on a virtual clock (expiry releases pinned blocks).
 */
import { afterAll, describe, expect, it } from "vitest";
import { startSimServer, type SimServer, type SimServerOptions } from "../../src/adapter/node/sim-server.ts";
import { KvStaging } from "../../src/sim/disagg-staging.ts";
import { decodeKvEventBatch } from "../../src/events/kv-event-decode.ts";
import { callbackSink, type EncodedKvBatch } from "../../src/sim/kv-event-sink.ts";
import { realClock } from "../../src/sim/sim-clock.ts";
import { drain, range, simFixture } from "./helpers.ts";

const servers: SimServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

async function sim(opts: SimServerOptions, batches?: EncodedKvBatch[]): Promise<SimServer> {
  const workerId = opts.workerId ?? `w${servers.length}`;
  const sinks = batches ? [callbackSink({ workerId, dpRank: 0 }, (b) => batches.push(b))] : [];
  const s = await startSimServer({ clock: realClock(), speedupRatio: 100, numGpuBlocks: 256, maxModelLen: 4096, workerId, sinks, ...opts });
  servers.push(s);
  return s;
}

const post = (url: string, body: unknown, signal?: AbortSignal) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal });

const ASK_REMOTE_DECODE = { do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null };

/** The `data:` payloads of an SSE body. */
async function sse(res: Response): Promise<Record<string, any>[]> {
  const text = await res.text();
  return text.split("\n\n").filter(Boolean).map((e) => e.slice(6)).filter((d) => d !== "[DONE]").map((d) => JSON.parse(d));
}

function storedHashes(batches: EncodedKvBatch[]): bigint[] {
  const out: bigint[] = [];
  for (const b of batches) for (const e of decodeKvEventBatch(b.bytes).events) if (e.type === "BlockStored") out.push(...e.block_hashes.map(BigInt));
  return out;
}

describe("vLLM flow (kv_transfer_params)", () => {
  it("should keep the prefill's blocks for the decode, which reads them, reports them cached and publishes them", async () => {
    const pEvents: EncodedKvBatch[] = [], dEvents: EncodedKvBatch[] = [];
    const p = await sim({ role: "prefill", workerId: "p0" }, pEvents);
    const d = await sim({ role: "decode", workerId: "d0" }, dEvents);
    const prompt = range(1000, 100); // 6 whole blocks of 16 and 4 tokens
    const pre = await post(`${p.url}/v1/completions`, { prompt_token_ids: prompt, max_tokens: 1, stream: false, kv_transfer_params: ASK_REMOTE_DECODE });
    expect(pre.status).toBe(200);
    const pj = await pre.json();
    expect(pj.usage).toMatchObject({ prompt_tokens: 100, completion_tokens: 1 });
    const params = pj.kv_transfer_params;
    expect(params).toMatchObject({ do_remote_prefill: true, do_remote_decode: false, remote_host: "127.0.0.1", remote_port: p.port, tp_size: 1 });
    expect(params.remote_block_ids).toHaveLength(6);
    expect(params.remote_engine_id).toMatch(/^p0-/);
    // The blocks stay referenced on the prefill engine until the decode reads them.
    expect(p.engine.cache.usedBlocks).toBe(6);

    const dec = await post(`${d.url}/v1/completions`, { prompt_token_ids: prompt, max_tokens: 4, stream: true, stream_options: { include_usage: true }, kv_transfer_params: params });
    expect(dec.status).toBe(200);
    const chunks = await sse(dec);
    const usage = chunks.at(-1)!.usage;
    // One token must be computed locally to sample from, so the transfer covers floor(99 / 16) = 6 blocks.
    expect(usage).toMatchObject({ prompt_tokens: 100, completion_tokens: 4, prompt_tokens_details: { cached_tokens: 96 } });
    expect(p.engine.cache.usedBlocks).toBe(0);
    // The decode engine now caches the transferred blocks and told its KV-event consumers, with the prefill's hashes.
    await new Promise((r) => setTimeout(r, 20));
    const fromPrefill = storedHashes(pEvents).slice(0, 6);
    expect(storedHashes(dEvents).slice(0, 6)).toEqual(fromPrefill);
    for (const h of fromPrefill) expect(d.engine.cache.lookup(h)).toBeDefined();

    // The KV was read once; a second read finds nothing and the decode fails cleanly.
    const again = await post(`${d.url}/v1/completions`, { prompt_token_ids: prompt, max_tokens: 2, kv_transfer_params: params });
    expect(again.status).toBe(502);
    expect((await again.json()).error.message).toMatch(/holds no KV for request/);
    // The prefill engine's /metrics counts what happened to the KV it kept.
    const m = await (await fetch(`${p.url}/metrics`)).text();
    expect(m).toMatch(/^kvgate_sim_kv_transfers_total\{engine="0",model_name="[^"]*",state="staged"\} 1$/m);
    expect(m).toMatch(/^kvgate_sim_kv_transfers_total\{engine="0",model_name="[^"]*",state="taken"\} 1$/m);
    expect(m).toMatch(/^kvgate_sim_kv_transfers_total\{engine="0",model_name="[^"]*",state="expired"\} 0$/m);
  });

  it("should refuse transfer fields on an engine of the other role, and a streaming remote-decode prefill", async () => {
    const p = await sim({ role: "prefill" });
    const d = await sim({ role: "decode" });
    const onDecode = await post(`${d.url}/v1/completions`, { prompt_token_ids: range(1, 40), max_tokens: 1, kv_transfer_params: ASK_REMOTE_DECODE });
    expect(onDecode.status).toBe(400);
    expect((await onDecode.json()).error.message).toMatch(/needs a prefill engine/);
    const streaming = await post(`${p.url}/v1/completions`, { prompt_token_ids: range(1, 40), max_tokens: 1, stream: true, kv_transfer_params: ASK_REMOTE_DECODE });
    expect(streaming.status).toBe(400);
    const wrongIds = await post(`${p.url}/kv_transfer/read`, { remote_engine_id: "nope", remote_request_id: "x", remote_block_ids: [] });
    expect(wrongIds.status).toBe(409);
  });

  it("should serve a decode-role request without transfer fields on its own (local prefill)", async () => {
    const d = await sim({ role: "decode" });
    const res = await post(`${d.url}/v1/completions`, { prompt_token_ids: range(5000, 50), max_tokens: 3 });
    expect(res.status).toBe(200);
    expect((await res.json()).usage).toMatchObject({ prompt_tokens: 50, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 0 } });
  });
});

describe("SGLang flow (bootstrap room)", () => {
  it("should meet in the room whichever leg arrives first, and stream the decode with the transferred prefix cached", async () => {
    const p = await sim({ role: "prefill", workerId: "sp" });
    const d = await sim({ role: "decode", workerId: "sd" });
    for (const decodeFirst of [true, false]) {
      const prompt = range(decodeFirst ? 20_000 : 30_000, 70);
      const room = decodeFirst ? 2n ** 62n + 12345n : 77n;
      const boot = `"bootstrap_host":"127.0.0.1","bootstrap_port":${p.port},"bootstrap_room":${room}`;
      const body = (extra: string) => `{"prompt_token_ids":${JSON.stringify(prompt)},"max_tokens":5,${extra}${boot}}`;
      const send = (url: string, text: string) => fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: text });
      let decode: Promise<Response>, prefill: Promise<Response>;
      if (decodeFirst) {
        decode = send(d.url, body(`"stream":true,"stream_options":{"include_usage":true},`));
        await new Promise((r) => setTimeout(r, 30));
        prefill = send(p.url, body(""));
      } else {
        prefill = send(p.url, body(""));
        expect((await prefill).status).toBe(200);
        decode = send(d.url, body(`"stream":true,"stream_options":{"include_usage":true},`));
      }
      const pre = await (await prefill).json();
      // A prefill server samples the first token only, whatever max_tokens says.
      expect(pre.usage.completion_tokens).toBe(1);
      const dres = await decode;
      expect(dres.status).toBe(200);
      const chunks = await sse(dres);
      expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 70, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 64 } });
    }
    expect(p.engine.cache.usedBlocks).toBe(0);
  });

  it("should fail the decode with a 504 when its prefill never arrives, and with a 502 when the prefill was refused", async () => {
    const p = await sim({ role: "prefill" });
    const d = await sim({ role: "decode", bootstrapTimeoutMs: 150 });
    const boot = { bootstrap_host: "127.0.0.1", bootstrap_port: p.port };
    const lonely = await post(`${d.url}/v1/completions`, { prompt_token_ids: range(1, 40), max_tokens: 2, ...boot, bootstrap_room: 999 });
    expect(lonely.status).toBe(504);
    expect((await lonely.json()).error.message).toMatch(/no prefill for bootstrap room 999 arrived/);

    const decode = post(`${d.url}/v1/completions`, { prompt_token_ids: range(1, 40), max_tokens: 2, ...boot, bootstrap_room: 1000 });
    await new Promise((r) => setTimeout(r, 20));
    // Too long for the engine: refused before it runs, so the room fails and the waiting decode learns it.
    const refused = await post(`${p.url}/v1/completions`, { prompt_token_ids: range(1, 5000), max_tokens: 2, ...boot, bootstrap_room: 1000 });
    expect(refused.status).toBe(400);
    const res = await decode;
    expect(res.status).toBe(502);
    expect((await res.json()).error.message).toMatch(/bootstrap room 1000 failed/);
  });
});

describe("KV staging on the prefill engine", () => {
  it("should pin a finished request's blocks against eviction and release them on read or on expiry", async () => {
    const f = await simFixture({ numGpuBlocks: 8, kvTransferTimeoutMs: 1_000 });
    const staging = new KvStaging(f.engine, 1_000);
    const prompt = range(1, 64); // 4 blocks
    let kept: number[] = [];
    f.engine.submit({ prompt, maxTokens: 1 }, { onFinish: (r) => void (kept = staging.stage(`req:${r.id}`, prompt).blockIds) });
    f.clock.advance(100); // the request ends well before the transfer timeout
    expect(kept).toHaveLength(4);
    expect(f.engine.cache.usedBlocks).toBe(4);
    // Another request needing every free block cannot evict the pinned ones: it waits for them.
    const big = f.engine.submit({ prompt: range(500, 100), maxTokens: 1 });
    f.clock.advance(400);
    expect(f.engine.waiting).toBe(1);
    f.clock.advance(600); // past the transfer timeout: released, and the waiting request gets its blocks
    const [r] = await drain(f, [big]);
    expect(r!.reason).toBe("length");
    expect(staging.stats).toMatchObject({ staged: 1, expired: 1, taken: 0 });
    expect(staging.pinnedBlocks).toBe(0);
  });
});
