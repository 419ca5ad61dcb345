/**
 * @module Reads a KVEventBatch envelope in either shape engines send (array or map, docs/kv-events.md), handing each event
 * to a callback as it is read.
 */
import { corruptEvent, type MsgpackCursor } from "./msgpack-cursor.ts";
import type { EventScratch } from "./event-scratch.ts";

export interface BatchEnvelope {
  ts: number;
  /** The batch's data-parallel rank; null when the engine sent none. */
  rank: number | null;
  events: number;
}

const enc = new TextEncoder();
const K_TS = 0, K_EVENTS = 1;
const BATCH_KEYS = ["ts", "events", "data_parallel_rank", "attn_dp_rank", "dp_rank"].map((s) => enc.encode(s));

/** Reads the batch in `payload`; `onEvent` sees `scratch` filled with each event in order. Throws on malformed input. */
export function readKvEventBatch(c: MsgpackCursor, payload: Uint8Array, scratch: EventScratch,
  onEvent: (e: EventScratch) => void): BatchEnvelope {
  c.reset(payload);
  let ts = NaN, rank: number | null = null, events = -1;
  const readEvents = (): void => {
    events = c.array();
    for (let i = 0; i < events; i++) {
      scratch.read(c);
      onEvent(scratch);
    }
  };
  const readRank = (): void => {
    if (c.isNil()) c.pos++;
    else rank = c.uint();
  };
  if (c.isArray()) {
    const n = c.array();
    if (n < 2) throw corruptEvent(`batch of ${n} elements`);
    ts = c.float();
    readEvents();
    if (n >= 3) readRank();
    for (let i = 3; i < n; i++) c.skip();
  } else if (c.isMap()) {
    const n = c.map();
    for (let i = 0; i < n; i++) {
      if (!c.isStr()) { c.skip(); c.skip(); continue; }
      const k = c.key(BATCH_KEYS);
      if (k === K_TS) ts = c.float();
      else if (k === K_EVENTS) readEvents();
      else if (k > K_EVENTS) readRank();
      else c.skip();
    }
  } else {
    throw corruptEvent("batch is neither an array nor a map");
  }
  if (Number.isNaN(ts) || events < 0) throw corruptEvent("batch misses ts or events");
  if (c.pos !== c.end) throw corruptEvent(`${c.end - c.pos} bytes after the batch`);
  return { ts, rank, events };
}
