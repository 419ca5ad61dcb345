/**
 * @module The admin API behind a bearer token (Hono's bearer-auth): list, add, drain or re-enable, and remove
 * workers, and ingest KV-event batches. Without a configured token the whole API answers 403.
 *
 *   GET    /admin/workers              the fleet with each rank's live load
 *   POST   /admin/workers              {url, id?, models?, block_size?, dp_size?, dp_start?, role?, kv_events?,
 *                                       total_kv_blocks?, max_batched_tokens?, bootstrap_port?, eagle?} → 201
 *   PATCH  /admin/workers/:id          {health: "healthy" | "draining" | "unhealthy"}
 *   POST   /admin/workers/:id/drain    no new requests; in-flight ones finish
 *   DELETE /admin/workers/:id          forget it (its bookings are freed, its cache entries dropped)
 *   POST   /admin/kv-events            one vLLM KVEventBatch (msgpack) with x-kvgate-worker, x-kvgate-dp-rank, x-kvgate-seq;
 *                                       or (content-type application/vnd.kvgate.kv-frames) raw engine messages from
 *                                       `kvgate bridge`, with x-kvgate-bridge (session) and x-kvgate-post (number)
 *   GET    /admin/index/digest         per (worker, rank) the blocks the index holds and an order-independent digest of
 *                                       them: replicas whose answers match hold the same index (src/replicas/index-divergence.ts)
 */
import { Hono, type Context } from "hono";
import { bearerToken } from "./bearer-token.ts";
import { bodyLimit } from "./body-limit.ts";
import { KvgateError } from "../core/errors.ts";
import type { WorkerHealth } from "../routing/index.ts";
import { parseWorker } from "./config.ts";
import type { FleetWorker } from "./fleet.ts";
import type { GatewayState } from "./gateway-state.ts";
import { readJsonObject } from "../core/json-body.ts";
import { decodeKvFrames, KV_FRAMES_CONTENT_TYPE } from "../events/kv-frames.ts";
import { indexDigest } from "../core/index-operations.ts";

function workerJson(gw: GatewayState, w: FleetWorker): Record<string, unknown> {
  const ranks = gw.router.snapshot().ranks.filter((r) => r.worker === w.id);
  return {
    id: w.id, url: w.url, models: w.models, adapters: w.adapters, lora_on_demand: w.entry.loadsAdapters, role: w.role, block_size: w.blockSize, dp_start: w.dpStart, dp_size: w.dpSize,
    kv_events: w.kvEvents, eagle: w.entry.eagle, total_kv_blocks: w.totalKvBlocks ?? null, max_batched_tokens: w.maxBatchedTokens ?? null,
    bootstrap_port: w.bootstrapPort ?? null,
    health: ranks[0]?.health ?? "unknown", unreachable: gw.health.isDown(w.id), circuit: gw.health.circuitState(w.id) ?? null,
    engine_metrics_stale: gw.engineMetrics.isStale(w.id),
    ranks: ranks.map((r) => ({ dp_rank: r.dpRank, active_requests: r.activeRequests, active_blocks: r.activeBlocks, active_prefill_tokens: r.activePrefillTokens,
      remote: { requests: r.remote.requests, prefill_tokens: r.remote.prefillTokens, blocks: r.remote.blocks } })),
  };
}

function optionalInt(c: Context, name: string): number | undefined {
  const v = c.req.header(name);
  if (v === undefined || v === "") return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${name} must be a non-negative integer`);
  return n;
}

export function adminRoutes(gw: GatewayState): Hono {
  const admin = new Hono();
  const token = gw.config.adminToken;
  admin.use("*", token
    ? bearerToken(token)
    : async function adminDisabled() {
      throw new KvgateError("KVGATE_ERR_FORBIDDEN", "the admin API is disabled; start kvgate with --admin-token (KVGATE_ADMIN_TOKEN)");
    });

  admin.get("/workers", (c) => c.json({ object: "list", data: gw.fleet.list().map((w) => workerJson(gw, w)) }));

  admin.post("/workers", async (c) => {
    const w = await gw.fleet.add(parseWorker(await readJsonObject(c.req.raw)));
    try {
      await gw.ingest.attach(w);
    } catch (e) {
      gw.fleet.remove(w.id);
      throw e;
    }
    gw.log("info", `worker ${w.id} added: ${w.url} serving ${w.models.join(", ")}${w.kvEvents ? " (KV events)" : ""}`);
    gw.adminChanges?.workerAdded(w.id);
    return c.json(workerJson(gw, w), 201);
  });

  admin.patch("/workers/:id", async (c) => {
    const id = c.req.param("id");
    const health = (await readJsonObject(c.req.raw)).health;
    if (health !== "healthy" && health !== "draining" && health !== "unhealthy") {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "health must be healthy, draining or unhealthy", { param: "health" });
    }
    gw.fleet.setHealth(id, health as WorkerHealth);
    gw.health.operatorSet(id, health);
    gw.adminChanges?.workerHealth(id, health as WorkerHealth);
    return c.json(workerJson(gw, gw.fleet.require(id)));
  });

  admin.post("/workers/:id/drain", (c) => {
    const id = c.req.param("id");
    gw.fleet.setHealth(id, "draining");
    gw.health.operatorSet(id, "draining");
    gw.adminChanges?.workerHealth(id, "draining");
    return c.json(workerJson(gw, gw.fleet.require(id)));
  });

  admin.delete("/workers/:id", (c) => {
    const id = c.req.param("id");
    const freed = gw.fleet.remove(id);
    gw.health.forget(id);
    gw.ingest.forget(id);
    gw.log("info", `worker ${id} removed (${freed} bookings freed)`);
    gw.adminChanges?.workerRemoved(id);
    return c.json({ id, removed: true, freed_bookings: freed });
  });

  admin.post("/kv-events", bodyLimit(gw.config.maxBodyBytes), async (c) => {
    const worker = c.req.header("x-kvgate-worker");
    if (!worker) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "x-kvgate-worker is required");
    const bytes = new Uint8Array(await c.req.arrayBuffer());
    if ((c.req.header("content-type") ?? "").startsWith(KV_FRAMES_CONTENT_TYPE)) {
      const session = c.req.header("x-kvgate-bridge");
      const post = optionalInt(c, "x-kvgate-post");
      const r = gw.ingest.ingestFrames({
        worker, dpRank: optionalInt(c, "x-kvgate-dp-rank"), frames: decodeKvFrames(bytes),
        source: session && post !== undefined ? { session, post } : undefined,
      });
      if (r.gap > 0) gw.log("warn", `worker ${worker}: ${r.gap} gap(s) in its KV-event sequence (its cache view is cold until rebuilt)`);
      return c.json(r);
    }
    const r = gw.ingest.ingest({ worker, dpRank: optionalInt(c, "x-kvgate-dp-rank"), seq: optionalInt(c, "x-kvgate-seq"), bytes });
    if (r.gap > 0) gw.log("warn", `worker ${worker}: ${r.gap} KV-event batches lost before this one (its cache view may be stale)`);
    if (r.restarted) gw.log("info", `worker ${worker}: KV events restarted at seq 0; its cached blocks were cleared`);
    return c.json(r);
  });

  admin.get("/index/digest", (c) => {
    const ranks = indexDigest(gw.index).map((d) => ({ worker: d.worker, dp_rank: d.dpRank, blocks: d.blocks, digest: d.digest }));
    return c.json({ object: "index_digest", ranks, total_blocks: ranks.reduce((n, r) => n + r.blocks, 0) });
  });

  return admin;
}
