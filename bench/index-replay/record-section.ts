/**
 * @module Section 5 of the index bench: approximate mode's write per request — recording a routed 8k-token prompt with
 * a sliding TTL (KvIndex.recordRoute) — against routing the same prompt, in the same run; and the same on a full index,
 * where every new block first evicts the oldest timer (a long-running router's steady state).
 */
import { KvIndex } from "../../src/core/kv-index.ts";
import { describe, fmtRatio, measure } from "../harness.ts";
import type { Run } from "./args.ts";

export interface RecordCost {
  /** recordRoute's median ns per call and per recorded block, and its time over route's for the same prompts. */
  recordNs: number;
  recordNsPerBlock: number;
  recordOverRoute: number;
  timers: number;
  /** On a full index, half of each prompt new: recordRoute's median ns per call and per evicted block. */
  fullRecordNs: number;
  fullNsPerEvicted: number;
}

const PROMPTS = 512;
const WORKERS = 8;
const TOKENS = 8192;
const BLOCK = 64;

/** Families of prompts sharing their first half, each prompt recurring every PROMPTS calls (well within the TTL). */
function prompts(): Uint32Array[] {
  return Array.from({ length: PROMPTS }, (_, p) => {
    const t = new Uint32Array(TOKENS);
    let x = (p % 16) * 7919 + 1;
    for (let i = 0; i < TOKENS; i++) {
      if (i === TOKENS >> 1) x = p * 104729 + 3;
      x = (Math.imul(x ^ (x >>> 13), 0x5bd1e995) + i) >>> 0;
      t[i] = x % 150_000;
    }
    return t;
  });
}

/** Section 5: the steady state of a fleet without KV events, where every routed prompt refreshes its blocks' TTLs. */
export function recordCost(run: Run): RecordCost {
  const { module, S, results, m, log } = run;
  log();
  const idx = new KvIndex(module, { maxSlots: 64, capacity: 1 << 18, maxPromptTokens: 1 << 14 });
  const ps = prompts();
  let now = 0, at = 0;
  // Two passes first, so every prompt's blocks are held and each later call refreshes (the common case).
  for (let i = 0; i < 2 * PROMPTS; i++) {
    idx.route(ps[i % PROMPTS]!, { blockSize: BLOCK });
    idx.recordRoute(`w${i % WORKERS}`, 0, ++now);
  }
  const timers = idx.stats().ttlEntries;
  log(`5. approximate mode: recording a routed ${TOKENS}-token prompt (${TOKENS / BLOCK} blocks, sliding TTL) on one of ${WORKERS} workers; ` +
    `${PROMPTS} prompts recurring, ${timers} timers held`);
  m.routeApprox = measure(`route bs=${BLOCK} (hash + match), the same prompts`, (n) => {
    let a = 0;
    for (let i = 0; i < n; i++) a += idx.route(ps[at++ % PROMPTS]!, { blockSize: BLOCK });
    return a;
  }, { samples: S });
  m.recordApprox = measure(`route + recordRoute (every block's TTL refreshed)`, (n) => {
    let a = 0;
    for (let i = 0; i < n; i++) {
      const p = at++ % PROMPTS;
      idx.route(ps[p]!, { blockSize: BLOCK });
      a += idx.recordRoute(`w${p % WORKERS}`, 0, ++now);
    }
    return a;
  }, { samples: S });
  log("  " + describe(m.routeApprox));
  log("  " + describe(m.recordApprox));
  const recordNs = m.recordApprox.medianNs - m.routeApprox.medianNs;
  const refresh = { recordNs, recordNsPerBlock: recordNs / (TOKENS / BLOCK), recordOverRoute: recordNs / m.routeApprox.medianNs, timers };
  log(`  recordRoute alone (difference of medians): ${(recordNs / 1000).toFixed(2)} µs per call, ${refresh.recordNsPerBlock.toFixed(1)} ns per block, ` +
    `${fmtRatio(refresh.recordOverRoute)} the route`);
  const out: RecordCost = { ...refresh, ...fullIndexRecord(run) };
  results.record = out;
  return out;
}

/**
 * recordRoute when the index is full: each call's second half is new (its first token changes), so its 64 new blocks
 * each evict the oldest timer before they are created, against routing the same kind of prompt without recording it.
 */
function fullIndexRecord(run: Run): Pick<RecordCost, "fullRecordNs" | "fullNsPerEvicted"> {
  const { module, S, m, log } = run;
  const idx = new KvIndex(module, { maxSlots: 64, capacity: 1 << 16, maxPromptTokens: 1 << 14 });
  const ps = prompts();
  let uniq = 0, now = 0;
  const fresh = (): Uint32Array => {
    const p = ps[uniq % PROMPTS]!;
    p[TOKENS >> 1] = 1_000_000 + uniq++;
    return p;
  };
  const newBlocks = TOKENS / BLOCK / 2;
  while (idx.counters().evicted < 4 * newBlocks * PROMPTS) {
    idx.route(fresh(), { blockSize: BLOCK });
    idx.recordRoute(`w${uniq % WORKERS}`, 0, ++now);
  }
  m.routeApproxFull = measure(`route bs=${BLOCK}, half of each prompt new, index full (${idx.stats().entries} entries)`, (n) => {
    let a = 0;
    for (let i = 0; i < n; i++) a += idx.route(fresh(), { blockSize: BLOCK });
    return a;
  }, { samples: S });
  const evicted0 = idx.counters().evicted;
  let calls = 0;
  m.recordApproxFull = measure(`route + recordRoute, ${newBlocks} new blocks per call, each evicting the oldest timer`, (n) => {
    let a = 0;
    for (let i = 0; i < n; i++) {
      a += idx.route(fresh(), { blockSize: BLOCK });
      a += idx.recordRoute(`w${uniq % WORKERS}`, 0, ++now);
      calls++;
    }
    return a;
  }, { samples: S });
  const perCall = (idx.counters().evicted - evicted0) / calls;
  log("  " + describe(m.routeApproxFull));
  log("  " + describe(m.recordApproxFull));
  const fullRecordNs = m.recordApproxFull.medianNs - m.routeApproxFull.medianNs;
  const fullNsPerEvicted = fullRecordNs / perCall;
  log(`  recordRoute on a full index (difference of medians): ${(fullRecordNs / 1000).toFixed(2)} µs per call, ${perCall.toFixed(0)} blocks evicted ` +
    `per call, ${fullNsPerEvicted.toFixed(0)} ns per evicted block (eviction and insertion)`);
  return { fullRecordNs, fullNsPerEvicted };
}
