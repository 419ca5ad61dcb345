/**
 * State router replicas share over a real nats-server beside the event stream: session bindings (KV bucket), worker
 * registry changes made through one replica's admin API (KV bucket, read by replicas started later), and an engine
 * restart seen only through a peer (its sequence numbers going back), which must rebuild the worker's view.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimServer } from "../../src/adapter/node/sim-server.ts";
import { addWorker, post, startSim } from "../gateway/helpers.ts";
import { NatsServer, natsServerPath } from "./nats-server.ts";
import { auth, chatOf, ingest, MODEL, metric, ReplicaPool, route, storedFor, until, workers } from "./replica-fixture.ts";

const skip = natsServerPath === undefined;
if (skip) console.warn("shared-state: skipped, no nats-server binary on PATH (Debian: apt-get install nats-server)");

describe.skipIf(skip)("state shared between replicas", () => {
  let sims: SimServer[];
  let nats: NatsServer;
  let pool: ReplicaPool;
  beforeAll(async () => {
    sims = await Promise.all([0, 1, 2].map(() => startSim(undefined, { speedupRatio: 1 })));
  }, 30_000);
  afterAll(async () => {
    await Promise.all(sims.map((s) => s.close()));
  });
  const fresh = async () => {
    nats = await NatsServer.start();
    pool = new ReplicaPool(nats, sims);
  };
  const dispose = async () => {
    await pool.closeAll();
    await nats.dispose();
  };

  describe("sessions", () => {
    beforeAll(fresh, 30_000);
    afterAll(dispose, 30_000);

    it("should honour on B the binding a session got on A, for a prompt B alone would send elsewhere", async () => {
      const a = await pool.start("sa", [], { workers: 2 });
      const b = await pool.start("sb", [], { workers: 2 });
      let differs = 0;
      for (let i = 0; i < 8; i++) {
        const session = { "x-session-id": `conversation-${i}` };
        const r = await post(`${a.g.url}/v1/chat/completions`, { ...chatOf(`Alpha ${i} opens the session. `), max_tokens: 2 }, session);
        expect(r.status).toBe(200);
        await r.text();
        const bound = (await route(a.g, chatOf(`Beta ${i} follows up. `), session)).worker;
        const alone = (await route(b.g, chatOf(`Beta ${i} follows up. `))).worker;
        if (alone !== bound) differs++;
        await until(`B to honour session ${i}`, () => route(b.g, chatOf(`Beta ${i} follows up. `), session), (x) => x.worker === bound);
      }
      // The binding, not chance, decided: for some sessions B's own choice was the other worker.
      expect(differs).toBeGreaterThan(0);
      expect(await metric(b.g, "kvgate_sync_sessions_applied_total")).toBeGreaterThanOrEqual(8);
      expect(await metric(a.g, "kvgate_sync_sessions_applied_total")).toBe(0);
      expect(await metric(a.g, 'kvgate_sync_sessions_published_total{result="stored"}')).toBeGreaterThanOrEqual(8);
    }, 60_000);
  });

  describe("worker registry", () => {
    beforeAll(fresh, 30_000);
    afterAll(dispose, 30_000);

    it("should apply workers added, drained and removed on A to B, and give a replica started later the current registry", async () => {
      const a = await pool.start("ga", [], { workers: 2 });
      const b = await pool.start("gb", [], { workers: 2 });
      expect(Object.keys(await workers(b.g)).sort()).toEqual(["w1", "w2"]);
      const added = await addWorker(a.g.url, { url: sims[2]!.url, id: "w3", models: [MODEL], kv_events: true });
      expect(added.status).toBe(201);
      await until("B to know w3", () => workers(b.g), (w) => w.w3 === "healthy");
      for (const id of ["w1", "w2"]) expect((await fetch(`${a.g.url}/admin/workers/${id}/drain`, { method: "POST", headers: auth })).status).toBe(200);
      await until("B to see w1 and w2 draining", () => workers(b.g), (w) => w.w1 === "draining" && w.w2 === "draining");
      const chat = chatOf("Only the added worker takes new requests. ");
      expect((await route(b.g, chat)).worker).toBe("w3");
      const served = await post(`${b.g.url}/v1/chat/completions`, { ...chat, max_tokens: 2 });
      expect(served.status).toBe(200);
      await served.text();

      const c = await pool.start("gc", [], { workers: 2 });
      await until("late C to read the registry", () => workers(c.g), (w) => w.w3 === "healthy" && w.w1 === "draining" && w.w2 === "draining");
      expect((await route(c.g, chat)).worker).toBe("w3");
      expect(await metric(c.g, 'kvgate_sync_registry_applied_total{op="add"}')).toBe(1);

      // Newest change wins: re-enabled on B, then w3 removed on A; everyone ends up with w1 healthy and no w3.
      const patch = await fetch(`${b.g.url}/admin/workers/w1`, { method: "PATCH", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ health: "healthy" }) });
      expect(patch.status).toBe(200);
      expect((await fetch(`${a.g.url}/admin/workers/w3`, { method: "DELETE", headers: auth })).status).toBe(200);
      for (const r of [a, b, c]) await until("w3 gone and w1 healthy everywhere", () => workers(r.g), (w) => w.w3 === undefined && w.w1 === "healthy" && w.w2 === "draining");
    }, 60_000);
  });

  describe("across a NATS outage", () => {
    beforeAll(fresh, 30_000);
    afterAll(dispose, 30_000);

    it("should deliver a registry change made while nats-server was down, and later changes and sessions after it is back", async () => {
      const a = await pool.start("na", [], { workers: 2 });
      const b = await pool.start("nb", [], { workers: 2 });
      await nats.stop();
      await until("A to notice the outage", () => metric(a.g, "kvgate_sync_connected"), (v) => v === 0);
      expect((await fetch(`${a.g.url}/admin/workers/w1/drain`, { method: "POST", headers: auth })).status).toBe(200);
      expect((await fetch(`${b.g.url}/ready`)).status).toBe(200);
      expect((await workers(b.g)).w1).toBe("healthy");
      await nats.restart();
      await until("B to see the drain made during the outage", () => workers(b.g), (w) => w.w1 === "draining", 30_000);
      expect((await addWorker(a.g.url, { url: sims[2]!.url, id: "w3", models: [MODEL], kv_events: true })).status).toBe(201);
      await until("B to see a worker added after the outage", () => workers(b.g), (w) => w.w3 === "healthy", 30_000);
      const session = { "x-session-id": "after-the-outage" };
      const r = await post(`${a.g.url}/v1/chat/completions`, { ...chatOf("Sessions after an outage. "), max_tokens: 2 }, session);
      expect(r.status).toBe(200);
      await r.text();
      const bound = (await route(a.g, chatOf("Sessions after an outage. "), session)).worker;
      await until("B to honour a session bound after the outage", async () => metric(b.g, "kvgate_sync_sessions_applied_total"), (v) => v >= 1, 30_000);
      expect((await route(b.g, chatOf("Another prompt. "), session)).worker).toBe(bound);
    }, 90_000);
  });

  describe("engine restarts seen through a peer", () => {
    beforeAll(fresh, 30_000);
    afterAll(dispose, 30_000);

    it("should clear the worker's view on B when A's engine sequence goes back, and apply what the new engine stored", async () => {
      const a = await pool.start("ea", [], { workers: 2 });
      const b = await pool.start("eb", [], { workers: 2 });
      const before = chatOf("Cached before the engine restarted. ");
      const old = storedFor(before, 81_000n);
      expect((await ingest(a.g, "w1", [old.event], 0)).status).toBe(200);
      expect((await ingest(a.g, "w1", [storedFor(chatOf("Another early prompt. "), 82_000n).event], 1)).status).toBe(200);
      await until("B to see the first engine's blocks", () => route(b.g, before), (r) => r.overlap_blocks === old.blocks && r.worker === "w1");
      // The engine restarts: its sequence numbers start again at 0, and its cache is empty but for what it stores now.
      const after = chatOf("Cached by the restarted engine. ");
      const fresh = storedFor(after, 83_000n);
      const r = (await (await ingest(a.g, "w1", [fresh.event], 0)).json()) as { restarted: boolean };
      expect(r.restarted).toBe(true);
      await until("B to apply the restarted engine's batch", () => route(b.g, after), (x) => x.overlap_blocks === fresh.blocks && x.worker === "w1");
      expect((await route(b.g, before)).overlap_blocks).toBe(0);
      expect(await metric(b.g, 'kvgate_sync_applied_total{kind="kv_restart"}')).toBe(1);
    }, 60_000);
  });
});
