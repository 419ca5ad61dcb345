/**
 * @module KV-event ingest over HTTP: events move the router's view (a stored prompt is matched, a removal, a lost
 * batch or an engine restart takes it back), duplicates are dropped, and bad input gets typed errors.
 */
import { describe, expect, it } from "vitest";
import { encodeKvEventBatch } from "../../src/sim/kv-event-codec.ts";
import type { KvCacheEvent } from "../../src/sim/kv-events.ts";
import { ApproximateTokenizer } from "../../src/tokenize/index.ts";
import { fakeGateway } from "./fake-workers.ts";
import { TOKEN } from "./helpers.ts";

const chat = { model: "m", messages: [{ role: "user", content: "Tell me a long story about routers. ".repeat(12) }] };
const tokens = Array.from(new ApproximateTokenizer().tokenizeChat(chat));
const blocks = Math.floor(tokens.length / 16);
const hashes = Array.from({ length: blocks }, (_, i) => 7_000n + BigInt(i));
const stored: KvCacheEvent = { type: "BlockStored", block_hashes: hashes, parent_block_hash: null, token_ids: tokens.slice(0, blocks * 16), block_size: 16, lora_id: null, medium: "GPU", lora_name: null };

async function setup(extra = ",kv_events=true") {
  const g = await fakeGateway(2, [], extra);
  const ingest = (events: KvCacheEvent[], headers: Record<string, string> = {}, body?: Uint8Array) =>
    g.gw.fetch(new Request("http://kvgate.test/admin/kv-events", {
      method: "POST", body: (body ?? encodeKvEventBatch({ ts: 1, events, data_parallel_rank: null })) as Uint8Array<ArrayBuffer>,
      headers: { authorization: `Bearer ${TOKEN}`, "x-kvgate-worker": "w1", ...headers },
    }));
  const overlap = async () => (await (await g.call("/v1/route", chat)).json()) as { worker: string; overlap_blocks: number; prompt_blocks: number };
  return { ...g, ingest, overlap };
}

describe("KV-event ingest", () => {
  it("should make a stored prompt route to its worker, and forget it when the blocks are removed", async () => {
    const { gw, ingest, overlap } = await setup();
    expect(blocks).toBeGreaterThan(4);
    expect((await overlap()).overlap_blocks).toBe(0);
    const res = await ingest([stored]);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ result: "applied", events: 1, gap: 0, restarted: false });
    expect(await overlap()).toMatchObject({ worker: "w1", overlap_blocks: blocks, prompt_blocks: blocks });
    expect(gw.state.ingest.blocksRemovedOf("w1", 0)).toBe(0);
    await ingest([{ type: "BlockRemoved", block_hashes: hashes.slice(2), medium: "GPU" }]);
    expect((await overlap()).overlap_blocks).toBe(2);
    // What the closed loop asks to tell an evicting engine from a stale index (usage-feedback.ts).
    expect(gw.state.ingest.blocksRemovedOf("w1", 0)).toBe(blocks - 2);
    expect(gw.state.ingest.blocksRemovedOf("w0", 0)).toBe(0);
    await ingest([{ type: "AllBlocksCleared" }]);
    expect((await overlap()).overlap_blocks).toBe(0);
  });

  it("should drop duplicate batches, clear a rank after a gap (no replay over HTTP) and after an engine restart", async () => {
    const { gw, ingest, overlap } = await setup();
    const seq = (n: number) => ({ "x-kvgate-seq": String(n) });
    expect((await (await ingest([stored], seq(0))).json()).result).toBe("applied");
    expect((await (await ingest([stored], seq(0))).json()).result).toBe("duplicate");
    expect((await overlap()).overlap_blocks).toBe(blocks);
    expect(await (await ingest([], seq(3))).json()).toMatchObject({ result: "applied", gap: 1, cold: true });
    expect((await overlap()).overlap_blocks).toBe(0);
    // Cold: what the worker stores now is indexed, but its overlap is not trusted until the view is rebuilt.
    expect(await (await ingest([stored], seq(4))).json()).toMatchObject({ cold: true });
    expect((await overlap()).overlap_blocks).toBe(0);
    expect(gw.state.ingest.hub.isCold("w1")).toBe(true);
    // A restart starts the engine (and the view) from empty: no longer cold.
    expect(await (await ingest([], seq(0))).json()).toMatchObject({ restarted: true, cold: false });
    expect((await overlap()).overlap_blocks).toBe(0);
    await ingest([stored], seq(1));
    expect((await overlap()).overlap_blocks).toBe(blocks);
    expect(gw.state.metrics.kvBatches.get({ result: "gap" })).toBe(1);
    expect(gw.state.metrics.kvBatches.get({ result: "duplicate" })).toBe(1);
    expect(gw.state.metrics.kvBatches.get({ result: "restart" })).toBe(1);
  });

  it("should skip events of another block size or another storage tier", async () => {
    const { ingest, overlap } = await setup();
    const r = await (await ingest([{ ...stored, medium: "CPU" }, { ...stored, block_size: 32 }])).json();
    expect(r.skipped).toBe(2);
    expect((await overlap()).overlap_blocks).toBe(0);
  });

  it("should ignore the events of a worker routed on kvgate's own decisions", async () => {
    const { ingest, overlap } = await setup(",kv_events=false");
    expect((await (await ingest([stored])).json()).result).toBe("ignored");
    expect((await overlap()).overlap_blocks).toBe(0);
  });

  it("should answer bad batches with typed errors", async () => {
    const { gw, ingest } = await setup();
    const cases: [Response, number, string][] = [
      [await ingest([stored], { "x-kvgate-worker": "nobody" }), 404, "KVGATE_ERR_UNKNOWN_WORKER"],
      [await ingest([], {}, new Uint8Array([0xc1, 0x00])), 400, "KVGATE_ERR_CORRUPT_EVENT"],
      [await ingest([], { "x-kvgate-dp-rank": "3" }), 400, "KVGATE_ERR_BAD_ARGUMENT"],
      [await ingest([], { "x-kvgate-seq": "-1" }), 400, "KVGATE_ERR_BAD_ARGUMENT"],
      [await gw.fetch(new Request("http://kvgate.test/admin/kv-events", { method: "POST", body: "x" })), 401, "KVGATE_ERR_UNAUTHORIZED"],
    ];
    for (const [res, status, code] of cases) {
      expect(res.status).toBe(status);
      expect((await res.json()).error.code).toBe(code);
    }
  });
});
