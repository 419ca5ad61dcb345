/**
 * Warm restarts over a real nats-server: a replica's snapshot (index, stream position) lands in the object store, and a
 * restarted or new replica loads it and finds prompts whose events the stream no longer holds; damaged snapshots and
 * snapshots of another format are refused (counted), falling back to an older snapshot or to replaying the stream.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimServer } from "../../src/adapter/node/sim-server.ts";
import { post, startSim } from "../gateway/helpers.ts";
import { NatsServer, natsServerPath } from "./nats-server.ts";
import { chatOf, ingest, metric, ReplicaPool, route, storedFor, until } from "./replica-fixture.ts";

const skip = natsServerPath === undefined;
if (skip) console.warn("warm-restart: skipped, no nats-server binary on PATH (Debian: apt-get install nats-server)");

const STREAM = "KVGATE_EVENTS";
const BUCKET = `${STREAM}_SNAPSHOTS`;

async function withNats<T>(url: string, fn: (nc: Awaited<ReturnType<typeof import("@nats-io/transport-node")["connect"]>>) => Promise<T>): Promise<T> {
  const { connect } = await import("@nats-io/transport-node");
  const nc = await connect({ servers: url });
  try {
    return await fn(nc);
  } finally {
    await nc.close();
  }
}

/** A Stored event of one block of its own (16 tokens), for filling the stream. */
function filler(i: number) {
  const tokens = Array.from({ length: 16 }, (_, k) => 50_000 + i * 16 + k);
  return { type: "BlockStored" as const, block_hashes: [7_000_000n + BigInt(i)], parent_block_hash: null, token_ids: tokens, block_size: 16, lora_id: null, medium: "GPU", lora_name: null };
}

describe.skipIf(skip)("warm restarts", () => {
  let sims: SimServer[];
  beforeAll(async () => {
    sims = await Promise.all([startSim(undefined, { speedupRatio: 1 }), startSim(undefined, { speedupRatio: 1 })]);
  }, 30_000);
  afterAll(async () => {
    await Promise.all(sims.map((s) => s.close()));
  });

  describe("with the stream trimmed past the events a replica would need", () => {
    let nats: NatsServer;
    let pool: ReplicaPool;
    beforeAll(async () => {
      nats = await NatsServer.start();
      pool = new ReplicaPool(nats, sims);
    }, 30_000);
    afterAll(async () => {
      await pool.closeAll();
      await nats.dispose();
    }, 30_000);

    it("should load the snapshot at start, so a restarted and a new replica find a prompt the stream has lost", async () => {
      const flags = ["--nats-stream-max-msgs", "100", "--snapshot-interval-ms", "300"];
      const a = await pool.start("ra", flags);
      const chat = chatOf("A warm restart remembers this prompt. ");
      const { event, blocks } = storedFor(chat, 31_000n);
      expect((await ingest(a.g, "w1", [event])).status).toBe(200);
      for (let i = 0; i < 120; i++) expect((await ingest(a.g, "w2", [filler(i)])).status).toBe(200);
      await until("A to read its 121 batches back", () => metric(a.g, "kvgate_sync_stream_seq"), (v) => v >= 121);
      const before = (await metric(a.g, 'kvgate_sync_snapshots_total{result="written"}')) || 0;
      await until("A to write a snapshot covering them", () => metric(a.g, 'kvgate_sync_snapshots_total{result="written"}'), (v) => v >= before + 2);
      // The stream kept only its last 100 batches: P's batch (sequence 1) is gone from it.
      const first = await withNats(nats.url, async (nc) => {
        const { jetstreamManager } = await import("@nats-io/jetstream");
        return (await (await jetstreamManager(nc)).streams.info(STREAM)).state.first_seq;
      });
      expect(first).toBeGreaterThan(1);
      await a.stop();

      const t0 = Date.now();
      const a2 = await pool.start("ra", flags);
      const warm = await until("restarted A to find the prompt", () => route(a2.g, chat), (r) => r.overlap_blocks === blocks);
      const warmMs = Date.now() - t0;
      console.log(`warm-restart: restarted replica routed with a warm index ${warmMs} ms after it started`);
      expect(warm.worker).toBe("w1");
      expect(await metric(a2.g, 'kvgate_sync_snapshots_total{result="loaded"}')).toBe(1);
      expect(await metric(a2.g, "kvgate_sync_restored_entries")).toBeGreaterThanOrEqual(blocks + 100);
      expect(await metric(a2.g, "kvgate_sync_last_snapshot_age_seconds")).toBeLessThan(60);

      const b = await pool.start("rb", ["--nats-stream-max-msgs", "100", "--snapshot-interval-ms", "0"]);
      await until("new B to find the prompt", () => route(b.g, chat), (r) => r.overlap_blocks === blocks && r.worker === "w1");
      // Batches after the snapshot still arrive through the stream, from where the snapshot left off.
      const later = storedFor(chatOf("Events after the snapshot come from the stream. "), 41_000n);
      expect((await ingest(a2.g, "w2", [later.event])).status).toBe(200);
      await until("B to see an event posted after it started", () => route(b.g, chatOf("Events after the snapshot come from the stream. ")),
        (r) => r.overlap_blocks === later.blocks && r.worker === "w2");
    }, 60_000);
  });

  describe("in approximate mode", () => {
    let nats: NatsServer;
    let pool: ReplicaPool;
    beforeAll(async () => {
      nats = await NatsServer.start();
      pool = new ReplicaPool(nats, sims);
    }, 30_000);
    afterAll(async () => {
      await pool.closeAll();
      await nats.dispose();
    }, 30_000);

    it("should bring back the decisions a replica recorded, which no stream holds", async () => {
      const flags = ["--kv-events", "off", "--snapshot-interval-ms", "200"];
      const a = await pool.start("xa", flags, { workers: 2, kvEvents: false });
      const chat = chatOf("Approximate routers forget on restart unless they snapshot. ");
      const r = await post(`${a.g.url}/v1/chat/completions`, { ...chat, max_tokens: 2 });
      expect(r.status).toBe(200);
      await r.text();
      const chosen = await route(a.g, chat);
      expect(chosen.overlap_blocks).toBeGreaterThan(4);
      const before = (await metric(a.g, 'kvgate_sync_snapshots_total{result="written"}')) || 0;
      await until("A to write a snapshot after the decision", () => metric(a.g, 'kvgate_sync_snapshots_total{result="written"}'), (v) => v >= before + 2);
      await a.stop();
      const a2 = await pool.start("xa", flags, { workers: 2, kvEvents: false });
      await until("restarted A to predict its earlier decision", () => route(a2.g, chat), (x) => x.overlap_blocks === chosen.overlap_blocks && x.worker === chosen.worker);
    }, 60_000);
  });

  describe("with damaged and foreign snapshots in the bucket", () => {
    let nats: NatsServer;
    let pool: ReplicaPool;
    beforeAll(async () => {
      nats = await NatsServer.start();
      pool = new ReplicaPool(nats, sims);
    }, 30_000);
    afterAll(async () => {
      await pool.closeAll();
      await nats.dispose();
    }, 30_000);

    it("should refuse them with a counted reason and fall back to an older snapshot, then to replaying the stream", async () => {
      const a = await pool.start("ca", ["--snapshot-interval-ms", "300"]);
      const chat = chatOf("Corrupt snapshots must not poison the index. ");
      const { event, blocks } = storedFor(chat, 61_000n);
      expect((await ingest(a.g, "w2", [event])).status).toBe(200);
      // Two more written: the second was surely taken after the event (one in flight may predate it).
      const before = (await metric(a.g, 'kvgate_sync_snapshots_total{result="written"}')) || 0;
      await until("A's snapshot", () => metric(a.g, 'kvgate_sync_snapshots_total{result="written"}'), (v) => v >= before + 2);
      await a.stop();

      const put = (name: string, data: Uint8Array, meta: Record<string, string>) => withNats(nats.url, async (nc) => {
        const { Objm } = await import("@nats-io/obj");
        await (await new Objm(nc).create(BUCKET)).putBlob({ name, metadata: meta }, data);
      });
      const real = await withNats(nats.url, async (nc) => {
        const { Objm } = await import("@nats-io/obj");
        return (await (await new Objm(nc).open(BUCKET)).getBlob("index-ca"))!;
      });
      const flipped = real.slice();
      flipped[flipped.length - 40]! ^= 0xff;
      const now = Date.now();
      await put("index-flip", flipped, { "kvgate-format": "1", "kvgate-taken-at": String(now + 10_000) });
      await put("index-zz", new TextEncoder().encode("not a snapshot at all"), { "kvgate-format": "1", "kvgate-taken-at": String(now + 20_000) });
      await put("index-old", real, { "kvgate-format": "0", "kvgate-taken-at": String(now + 30_000) });

      const b = await pool.start("cb", ["--snapshot-interval-ms", "0"]);
      await until("B to load A's own snapshot", () => metric(b.g, 'kvgate_sync_snapshots_total{result="loaded"}'), (v) => v === 1);
      expect(await metric(b.g, 'kvgate_sync_snapshots_total{result="refused_corrupt"}')).toBe(2);
      expect(await metric(b.g, 'kvgate_sync_snapshots_total{result="refused_format"}')).toBe(1);
      expect(await route(b.g, chat)).toMatchObject({ worker: "w2", overlap_blocks: blocks });
      await b.stop();

      // A third damaged one, newer still: every snapshot tried fails, and the stream (complete here) is replayed instead.
      await put("index-zz2", real.subarray(0, real.length - 1), { "kvgate-format": "1", "kvgate-taken-at": String(now + 40_000) });
      const c = await pool.start("cc", ["--snapshot-interval-ms", "0"]);
      await until("C to predict the overlap from the stream", () => route(c.g, chat), (r) => r.overlap_blocks === blocks && r.worker === "w2");
      expect(await metric(c.g, 'kvgate_sync_snapshots_total{result="refused_corrupt"}')).toBe(3);
      expect(Number.isNaN(await metric(c.g, 'kvgate_sync_snapshots_total{result="loaded"}'))).toBe(true);
      expect(await metric(c.g, "kvgate_sync_stream_seq")).toBeGreaterThanOrEqual(1);
    }, 60_000);
  });
});
