/** @module The index bench's replay drivers, event encoders and simulator checks, shared by its sections. */
import type { KvIndex } from "../../src/core/kv-index.ts";
import { EventBatchWriter } from "../../src/core/event-encoder.ts";
import type { ReferenceIndex } from "../../src/reference/index-reference.ts";
import { eventBlocks, type EventOp, type Replay, type ReplayOp } from "../trace-events.ts";
import { consume, now } from "../harness.ts";
import * as hooks from "../../test/support/kv-index-hooks.ts";

/* ------------------------------------------------------------------------------------------------------------ */
/* Replay drivers: one pass over the (cyclic) stream; each returns a checksum.                                   */

export function replayWasm(idx: KvIndex, ops: readonly ReplayOp[], names: readonly string[]): number {
  let acc = 0;
  for (const op of ops) {
    if (op.kind === "match") acc += hooks.findMatchesByHashes(idx, op.seq).matches.length;
    else if (op.kind === "stored") acc += hooks.stored(idx, names[op.worker]!, 0, op.parent, op.blocks).length;
    else acc += hooks.removed(idx, names[op.worker]!, 0, op.hashes);
  }
  return acc;
}

export function replayReference(ref: ReferenceIndex, ops: readonly ReplayOp[], slots: readonly number[]): number {
  let acc = 0;
  for (const op of ops) {
    if (op.kind === "match") acc += ref.findMatches(op.seq).size;
    else if (op.kind === "stored") acc += ref.store(slots[op.worker]!, op.parent, op.blocks).length;
    else acc += ref.remove(slots[op.worker]!, op.hashes);
  }
  return acc;
}

/** find_matches via the API, each request's events as one pre-encoded binary batch. */
export function replayWasmBatched(idx: KvIndex, matches: readonly (ReplayOp & { kind: "match" })[], batches: readonly (Uint8Array | null)[]): number {
  let acc = 0;
  for (let r = 0; r < batches.length; r++) {
    const m = matches[r];
    if (m) acc += hooks.findMatchesByHashes(idx, m.seq).matches.length;
    const b = batches[r];
    if (b) acc += idx.applyBatch(b).records;
  }
  return acc;
}

export function applyEventsApi(idx: KvIndex, events: readonly EventOp[], names: readonly string[]): number {
  let acc = 0;
  for (const op of events) {
    if (op.kind === "stored") acc += hooks.stored(idx, names[op.worker]!, 0, op.parent, op.blocks).length;
    else acc += hooks.removed(idx, names[op.worker]!, 0, op.hashes);
  }
  return acc;
}

export function applyBatches(idx: KvIndex, batches: readonly Uint8Array[]): number {
  let acc = 0;
  for (const b of batches) acc += idx.applyBatch(b).records;
  return acc;
}

export interface SplitTimes {
  matchMs: number;
  eventsMs: number;
  matches: number;
  eventBlocks: number;
}

/** `passes` instrumented replay passes; per component the fastest pass. */
export function splitPass(ops: readonly ReplayOp[], passes: number, match: (op: ReplayOp & { kind: "match" }) => number, event: (op: EventOp) => number): SplitTimes {
  let matchMs = Infinity, eventsMs = Infinity, matches = 0, eventBlocksN = 0;
  for (let p = 0; p < passes; p++) {
    let tm = 0, te = 0, acc = 0;
    matches = 0;
    eventBlocksN = 0;
    for (const op of ops) {
      const t0 = now();
      if (op.kind === "match") {
        acc += match(op);
        tm += now() - t0;
        matches++;
      } else {
        acc += event(op);
        te += now() - t0;
        eventBlocksN += eventBlocks(op);
      }
    }
    consume(acc);
    matchMs = Math.min(matchMs, tm);
    eventsMs = Math.min(eventsMs, te);
  }
  return { matchMs, eventsMs, matches, eventBlocks: eventBlocksN };
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Encoding (outside every timed loop).                                                                          */

export function encode(w: EventBatchWriter, op: EventOp, slots: readonly number[]): void {
  if (op.kind === "stored") w.stored(slots[op.worker]!, op.parent, op.hashes, op.locals);
  else w.removed(slots[op.worker]!, op.hashes);
}

/** The event stream in batches of at most `maxBytes` (a record is never split). */
export function encodeBatches(events: readonly EventOp[], slots: readonly number[], maxBytes: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  const w = new EventBatchWriter(maxBytes + 65536);
  const flush = (): void => {
    if (w.records > 0) out.push(w.bytes().slice());
    w.reset();
  };
  for (const op of events) {
    const size = 16 + (op.kind === "stored" ? 8 + 16 * op.hashes.length : 8 * op.hashes.length);
    if (w.byteLength + size > maxBytes) flush();
    encode(w, op, slots);
  }
  flush();
  return out;
}

/** One batch per request (its Removed + Stored), and one per drain event; null where a request caused none. */
export function encodePerRequest(replay: Replay, slots: readonly number[]): { matches: (ReplayOp & { kind: "match" })[]; batches: (Uint8Array | null)[] } {
  const matches: (ReplayOp & { kind: "match" })[] = [];
  const batches: (Uint8Array | null)[] = [];
  const w = new EventBatchWriter(1 << 16);
  const { ops, requestStarts } = replay;
  for (let r = 0; r + 1 < requestStarts.length; r++) {
    w.reset();
    for (let i = requestStarts[r]!; i < requestStarts[r + 1]!; i++) {
      const op = ops[i]!;
      if (op.kind === "match") matches[r] = op;
      else encode(w, op, slots);
    }
    batches.push(w.records > 0 ? w.bytes().slice() : null);
  }
  for (let i = requestStarts[requestStarts.length - 1]!; i < ops.length; i++) {
    w.reset();
    encode(w, ops[i] as EventOp, slots);
    batches.push(w.bytes().slice());
  }
  return { matches, batches };
}

/** The same events with every Stored cut into chains of at most `maxBlocks` blocks (parent = previous chunk's last). */
export function chunkStored(events: readonly EventOp[], maxBlocks: number): EventOp[] {
  const out: EventOp[] = [];
  for (const op of events) {
    if (op.kind !== "stored" || op.blocks.length <= maxBlocks) {
      out.push(op);
      continue;
    }
    for (let s = 0; s < op.blocks.length; s += maxBlocks) {
      out.push({
        kind: "stored", worker: op.worker, parent: s === 0 ? op.parent : op.hashes[s - 1]!,
        blocks: op.blocks.slice(s, s + maxBlocks), hashes: op.hashes.slice(s, s + maxBlocks), locals: op.locals.slice(s, s + maxBlocks),
      });
    }
  }
  return out;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Correctness of the stream against the simulator (untimed; run once per implementation).                      */

export function verifyWasm(idx: KvIndex, replay: Replay, names: readonly string[]): string[] {
  const errs: string[] = [];
  for (const op of replay.ops) {
    if (op.kind === "match") {
      const m = hooks.findMatchesByHashes(idx, op.seq).matches;
      const best = m.reduce((x, y) => Math.max(x, y.blocks), 0);
      if (best !== op.bestDepth || m.length !== op.matchedWorkers) {
        errs.push(`request ${op.request}: WASM best depth ${best} over ${m.length} workers, simulator ${op.bestDepth} over ${op.matchedWorkers}`);
      }
    } else if (op.kind === "stored") {
      const o = hooks.stored(idx, names[op.worker]!, 0, op.parent, op.blocks);
      if (o !== "applied") errs.push(`WASM stored on ${names[op.worker]}: ${o}`);
    } else {
      const u = hooks.removed(idx, names[op.worker]!, 0, op.hashes);
      if (u !== 0) errs.push(`WASM removed on ${names[op.worker]}: ${u} unknown`);
    }
    if (errs.length >= 5) break;
  }
  const left = idx.stats().entries;
  if (errs.length === 0 && left !== 0) errs.push(`WASM index holds ${left} entries after the drain`);
  return errs;
}

export function verifyReference(ref: ReferenceIndex, ops: readonly ReplayOp[], slots: readonly number[]): string[] {
  const errs: string[] = [];
  for (const op of ops) {
    if (op.kind === "match") {
      const m = ref.findMatches(op.seq);
      let best = 0;
      for (const d of m.values()) best = Math.max(best, d);
      if (best !== op.bestDepth || m.size !== op.matchedWorkers) errs.push(`request ${op.request}: reference ${best}/${m.size}, simulator ${op.bestDepth}/${op.matchedWorkers}`);
    } else if (op.kind === "stored") {
      const o = ref.store(slots[op.worker]!, op.parent, op.blocks);
      if (o !== "applied") errs.push(`reference stored: ${o}`);
    } else if (ref.remove(slots[op.worker]!, op.hashes) !== 0) errs.push(`reference removed unknown hashes`);
    if (errs.length >= 5) break;
  }
  if (errs.length === 0 && ref.size !== 0) errs.push(`reference holds ${ref.size} entries after the drain`);
  return errs;
}
