/**
 * @module The prefill engine's transfer endpoints, POST /kv_transfer/read and POST /bootstrap/take, on its own HTTP port
 * (docs/disaggregation.md#the-simulated-engines).
 */
import type { Hono } from "hono";
import { KvgateError } from "../core/errors.ts";
import { readJsonObject } from "../core/json-body.ts";
import type { SimDisagg } from "./disagg-sim.ts";

/** Longest long-poll one request may ask for. */
const MAX_WAIT_MS = 600_000;

function notFound(message: string): Response {
  return Response.json({ error: { message, type: "not_found_error", code: "not_found" } }, { status: 404 });
}

function conflict(status: 409 | 410, message: string): Response {
  return Response.json({ error: { message, type: "invalid_request_error", code: status === 409 ? "conflict" : "gone" } }, { status });
}

function bad(message: string): never {
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message);
}

export function disaggRoutes(app: Hono, d: SimDisagg): void {
  app.post("/kv_transfer/read", async (c) => {
    const body = await readJsonObject(c.req.raw);
    const { remote_engine_id: engineId, remote_request_id: id, remote_block_ids: ids } = body;
    if (typeof id !== "string" || id.length === 0) bad("remote_request_id must be a non-empty string");
    if (!Array.isArray(ids)) bad("remote_block_ids must be an array");
    if (engineId !== d.engineId) return conflict(409, `this is engine ${d.engineId}, not ${String(engineId)} (restarted?)`);
    const key = `req:${id}`;
    const kept = d.staging.peek(key);
    if (!kept) return notFound(`no KV kept for request ${id}`);
    // A reader naming other blocks is confused about what it reads: refuse, and keep the KV for the right one.
    if (kept.blockIds.length !== ids.length || kept.blockIds.some((b, i) => b !== ids[i])) return conflict(409, `block ids do not match the KV kept for request ${id}`);
    const out = d.staging.take(key);
    if (out.kind !== "taken") return notFound(`no KV kept for request ${id}`);
    return c.json(d.answer(out));
  });

  app.post("/bootstrap/take", async (c) => {
    const body = await readJsonObject(c.req.raw);
    const room = body.bootstrap_room;
    const key = typeof room === "string" && /^\d+$/.test(room) ? room : typeof room === "number" && Number.isInteger(room) && room >= 0 ? BigInt(room).toString() : bad("bootstrap_room must be a non-negative integer");
    const wait = body.wait_ms ?? 0;
    if (typeof wait !== "number" || !Number.isFinite(wait) || wait < 0) bad("wait_ms must be a non-negative number");
    const out = await d.staging.waitTake(`room:${key}`, Math.min(wait, MAX_WAIT_MS), c.req.raw.signal);
    if (out.kind === "absent") return notFound(`no prefill finished in bootstrap room ${key}`);
    if (out.kind === "failed") return conflict(410, `the prefill of bootstrap room ${key} failed: ${out.reason}`);
    return c.json(d.answer(out));
  });
}
