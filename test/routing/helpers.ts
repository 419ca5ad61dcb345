/** @module Fixtures for the routing tests: a router on a manual clock with a small index, prompts, and cache seeding. */
import { createKvIndex } from "../../src/core/create-kv-index.ts";
import type { KvIndex } from "../../src/core/kv-index.ts";
import { ManualClock } from "../../src/routing/clock.ts";
import { createPrng } from "../../src/routing/prng.ts";
import { Router, type FreedInfo } from "../../src/routing/router.ts";
import type { RouterConfigInput } from "../../src/routing/router-config.ts";
import type { RouteSignals, WorkerSpec } from "../../src/routing/routing-types.ts";
import * as hooks from "../support/kv-index-hooks.ts";

export const BS = 16;

export async function smallIndex(maxSlots = 64): Promise<KvIndex> {
  return createKvIndex({ maxSlots, capacity: 1 << 15, maxPromptTokens: 1 << 16, promptTokens: 1 << 14, approxMaxBlocks: 1 << 14, salt: 42n });
}

export interface Fixture {
  router: Router;
  index: KvIndex;
  clock: ManualClock;
  booked: { bookingId: number; requestId: string; worker: string; dpRank: number }[];
  freed: FreedInfo[];
  routed: RouteSignals[];
}

export async function fixture(config: RouterConfigInput = {}, workers: WorkerSpec[] = [], index?: KvIndex): Promise<Fixture> {
  const idx = index ?? (await smallIndex());
  const clock = new ManualClock(1_000_000);
  const f: Fixture = { router: undefined as unknown as Router, index: idx, clock, booked: [], freed: [], routed: [] };
  // A fine timer that advances 1 per reading keeps timing signals deterministic and non-zero.
  let fine = 0;
  f.router = new Router({
    index: idx, now: clock.now, random: createPrng(7), fineNow: () => ++fine,
    observer: { booked: (b) => f.booked.push(b), freed: (x) => f.freed.push(x), routed: (s) => f.routed.push(s) },
  }, config);
  for (const w of workers) f.router.addWorker(w);
  return f;
}

export function worker(id: string, extra: Partial<WorkerSpec> = {}): WorkerSpec {
  return { id, endpoint: `http://${id}`, models: ["m"], blockSize: BS, ...extra };
}

/** `len` tokens: the first `shared` come from prefix family `family`, the rest are unique to `uniq`. */
export function prompt(family: number, len: number, uniq: number, shared = len): Uint32Array {
  const t = new Uint32Array(len);
  for (let i = 0; i < len; i++) {
    t[i] = i < shared ? (family * 1_000_003 + i * 7919) % 150_000 : (uniq * 2_654_435 + i * 31 + 17) % 150_000 + 150_000;
  }
  return t;
}

/** Makes (worker, rank) cache the first `blocks` blocks of `tokens`, as a KV Stored event would. */
export function cache(index: KvIndex, workerId: string, dpRank: number, tokens: Uint32Array, blocks: number): void {
  const h = index.hash(tokens, { blockSize: BS });
  const stored = h.local.slice(0, blocks).map((local, i) => ({ hash: h.seq[i]!, local }));
  const outcome = hooks.stored(index, workerId, dpRank, null, stored);
  if (outcome !== "applied") throw new Error(`stored: ${outcome}`);
}

/** Distinct sequence hashes of the given prompts' complete blocks (independent recomputation for load checks). */
export function distinctBlocks(index: KvIndex, prompts: readonly Uint32Array[]): number {
  const seen = new Set<bigint>();
  for (const p of prompts) for (const h of index.hash(p, { blockSize: BS }).seq) seen.add(h);
  return seen.size;
}

/** A chain of `n` sequence-hash-like keys as (lo, hi) pairs: prompts of one family share their first `shared` blocks. */
export function chainKeys(family: number, uniq: number, n: number, shared: number): Uint32Array {
  const k = new Uint32Array(2 * n);
  for (let i = 0; i < n; i++) {
    const id = i < shared ? family * 1000 + i : 1_000_000 + uniq * 1000 + i;
    k[2 * i] = Math.imul(id, 0x9e3779b1) >>> 0;
    k[2 * i + 1] = Math.imul(id ^ 0x5bd1e995, 0x85ebca6b) >>> 0;
  }
  return k;
}
