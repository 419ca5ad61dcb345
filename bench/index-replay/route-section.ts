/** @module Section 4 of the index bench: the cost of routing one 8k-token prompt, as a multiple of copying its tokens into WASM. */
import xxhash from "xxhash-wasm";
import { BASE_SEED } from "../../src/core/hash-seeds.ts";
import { describe, fmtNs, fmtRatio, measure, table } from "../harness.ts";
import * as hooks from "../../test/support/kv-index-hooks.ts";
import type { Run } from "./args.ts";
import { rawHasher, routeSetup } from "./route-setup.ts";

/**
 * Per block size (`bs16`, `bs64`): medians and minimums of the route rows and their ratios to the copy floor. `typical`
 * is a prompt routed before (the prompt memo supplies its hashes, as for a conversation's repeated history); `cold`
 * bypasses the memo (every block hashed, as for a prompt the router has not seen).
 */
export type RouteCost = Record<string, { typicalOverCopy: number; typicalOverCopyMin: number; coldOverCopy: number; coldOverCopyMin: number }>;

/**
 * Section 4: route (copy + hash + match + read) at block sizes 16 and 64, the copy floor, and hashing alone; each
 * with the prompt memo (the default) and without it, and a prompt new on every call (the memo's miss: hash + remember).
 */
export async function routeCost(run: Run): Promise<RouteCost> {
  const { module, S, results, m, log } = run;
  log();
  const rs = await routeSetup(module, 1_000_000);
  log(`4. per-request route cost, 8192-token prompt (Uint32Array), 64 slots, index of ${rs.entries} entries (${rs.background} background; built in ${rs.setupMs.toFixed(0)} ms)`);
  log(`   typical: prompt held fully by 2 workers and partially by 6; worst: held by all 64 at staggered depths; both hot in cache`);
  const ridx = rs.idx;
  const raw = new Uint32Array(new ArrayBuffer(8192 * 4));
  m.copy = measure("copy 8192 tokens into WASM memory (copyTokens)", (n) => {
    for (let i = 0; i < n; i++) hooks.copyTokens(ridx, rs.tokens.typical);
    return n;
  }, { samples: S });
  m.copyRaw = measure("  cross-check: Uint32Array.set into a same-size ArrayBuffer", (n) => {
    for (let i = 0; i < n; i++) raw.set(rs.tokens.typical);
    return raw[n & 8191]!;
  }, { samples: S });
  log("  " + describe(m.copy));
  log("  " + describe(m.copyRaw));
  const hasher = rawHasher(module);
  hasher.load(rs.tokens.typical);
  for (const bs of [16, 64]) {
    const got = hasher.hash(bs);
    if (got !== 8192 / bs) throw new Error(`hash_prompt bs=${bs} returned ${got}, expected ${8192 / bs}`);
  }
  const xx = await xxhash();
  const tokBytes = new Uint8Array(rs.tokens.typical.buffer, rs.tokens.typical.byteOffset, rs.tokens.typical.byteLength);
  const routeRes: Record<string, unknown> = {};
  const rows: string[][] = [];
  for (const bs of [16, 64]) {
    const nb = 8192 / bs;
    for (const kind of ["typical", "worst", "unknown"] as const) {
      const tk = rs.tokens[kind];
      const expect = kind === "typical" ? 8 : kind === "worst" ? 64 : 0;
      for (const memo of [true, false]) {
        const got = ridx.route(tk, { blockSize: bs, memo });
        let deepest = 0;
        for (let i = 0; i < got; i++) deepest = Math.max(deepest, ridx.matches.depth(i));
        if (got !== expect || deepest !== (expect ? nb : 0)) log(`  ! route check bs=${bs} ${kind}: ${got} slots matched (expected ${expect}), deepest ${deepest} (expected ${nb})`);
      }
      const what = kind === "unknown" ? "copy + hash + match (exits at block 0: prompt unknown)" : `copy + hash + match + read ${expect} scores`;
      for (const memo of [true, false]) {
        const key = `route${bs}${kind}${memo ? "" : "Cold"}`;
        const opts = { blockSize: bs, memo };
        m[key] = measure(`route bs=${bs} ${kind}${memo ? ", seen before" : ", memo bypassed"}: ${what}`, (n) => {
          let a = 0;
          for (let i = 0; i < n; i++) {
            const k = ridx.route(tk, opts);
            for (let j = 0; j < k; j++) a += ridx.matches.slot(j) + ridx.matches.depth(j);
          }
          return a;
        }, { samples: S });
        log("  " + describe(m[key]!));
      }
    }
    // A prompt never seen: its first token changes on every call, so the memo misses (a new block-0 key is only noted).
    const fresh = new Uint32Array(rs.tokens.unknown);
    let salt = 0;
    for (const memo of [true, false]) {
      const key = `route${bs}fresh${memo ? "" : "Cold"}`, opts = { blockSize: bs, memo };
      m[key] = measure(`route bs=${bs} new prompt on every call${memo ? "" : ", memo bypassed"}`, (n) => {
        let a = 0;
        for (let i = 0; i < n; i++) {
          fresh[0] = 0x40000000 + (salt++ & 0x3fffffff);
          a += ridx.route(fresh, opts);
        }
        return a;
      }, { samples: S });
      log("  " + describe(m[key]!));
    }
    // A shared first half and a new second half on every call (a system prompt or document, then a new question):
    // 256 prompts in turn, their second halves random, twice as many as the memo holds, so each call finds only the
    // first half remembered; it reuses that half and remembers the prompt (a copy into its ring).
    const halves = Array.from({ length: 256 }, (_, v) => {
      const t = new Uint32Array(rs.tokens.typical);
      let x = 0x9e3779b9 ^ (v * 0x85ebca6b) ^ bs;
      for (let i = 4096; i < t.length; i++) t[i] = (x = (Math.imul(x, 1664525) + 1013904223) >>> 0) & 0xffff;
      return t;
    });
    for (const memo of [true, false]) {
      const key = `route${bs}half${memo ? "" : "Cold"}`, opts = { blockSize: bs, memo };
      let v = 0;
      m[key] = measure(`route bs=${bs} first half seen, second half new on every call${memo ? "" : ", memo bypassed"}`, (n) => {
        let a = 0;
        for (let i = 0; i < n; i++) a += ridx.route(halves[v++ & 255]!, opts);
        return a;
      }, { samples: S });
      log("  " + describe(m[key]!));
    }
    m[`hash${bs}`] = measure(`  hash only (core hash_prompt: local + chain, one call), bs=${bs}`, (n) => {
      let a = 0; for (let i = 0; i < n; i++) a += hasher.hash(bs); return a;
    }, { samples: S, opsPerIter: nb });
    m[`xxh64js${bs}`] = measure(`  xxhash-wasm h64Raw (XXH64) per block from JS, bs=${bs}`, (n) => {
      let a = 0;
      for (let i = 0; i < n; i++) {
        for (let b = 0; b < nb; b++) if (xx.h64Raw(tokBytes.subarray(b * bs * 4, (b + 1) * bs * 4), BASE_SEED) === 0n) a++;
      }
      return a;
    }, { samples: S, opsPerIter: nb });
    log("  " + describe(m[`hash${bs}`]!, "blk"));
    log("  " + describe(m[`xxh64js${bs}`]!, "blk"));
    const typ = m[`route${bs}typical`]!, worst = m[`route${bs}worst`]!;
    const cold = m[`route${bs}typicalCold`]!, unk = m[`route${bs}unknownCold`]!;
    const fr = m[`route${bs}fresh`]!, frCold = m[`route${bs}freshCold`]!;
    const hash = m[`hash${bs}`]!, xxj = m[`xxh64js${bs}`]!;
    // The breakdown uses the minimum of each item (the capability: least disturbed by other processes on the box).
    routeRes[`bs${bs}`] = {
      blocks: nb,
      typicalNs: typ.medianNs, typicalMinNs: typ.minNs, worstNs: worst.medianNs, worstMinNs: worst.minNs, unknownPromptNs: unk.medianNs,
      copyNs: m.copy.medianNs, copyMinNs: m.copy.minNs,
      typicalOverCopy: typ.medianNs / m.copy.medianNs, typicalOverCopyMin: typ.minNs / m.copy.minNs,
      coldNs: cold.medianNs, coldOverCopy: cold.medianNs / m.copy.medianNs, coldOverCopyMin: cold.minNs / m.copy.minNs,
      freshPromptNs: fr.medianNs, memoMissOverBypass: fr.medianNs / frCold.medianNs,
      halfNewNs: m[`route${bs}half`]!.medianNs, halfNewOverBypass: m[`route${bs}half`]!.medianNs / m[`route${bs}halfCold`]!.medianNs,
      worstOverCopy: worst.medianNs / m.copy.medianNs, worstOverCopyMin: worst.minNs / m.copy.minNs,
      hashNsPerBlock: hash.medianNs, hashMinNsPerBlock: hash.minNs, xxhashWasmNsPerBlock: xxj.medianNs, xxhashWasmMinNsPerBlock: xxj.minNs,
      // From minimums, memo bypassed: typical − unknown = the find_matches walk + reading 8 scores; unknown − copy − hash = TS wrapper + call.
      breakdownMinNs: { copy: m.copy.minNs, hash: hash.minNs * nb, match: cold.minNs - unk.minNs, wrapper: unk.minNs - m.copy.minNs - hash.minNs * nb },
    };
    rows.push([`bs=${bs}`, `${fmtNs(typ.medianNs)} (${fmtNs(typ.minNs)})`, `${fmtRatio(typ.medianNs / m.copy.medianNs)} (${fmtRatio(typ.minNs / m.copy.minNs)})`,
      `${fmtNs(worst.medianNs)}`, `${fmtRatio(worst.medianNs / m.copy.medianNs)} (${fmtRatio(worst.minNs / m.copy.minNs)})`,
      `${fmtNs(cold.medianNs)}`, `${fmtRatio(cold.medianNs / m.copy.medianNs)} (${fmtRatio(cold.minNs / m.copy.minNs)})`, fmtRatio(fr.medianNs / frCold.medianNs),
      fmtRatio(m[`route${bs}half`]!.medianNs / m[`route${bs}halfCold`]!.medianNs),
      fmtNs(hash.minNs * nb), fmtNs(cold.minNs - unk.minNs), fmtNs(unk.minNs - m.copy.minNs - hash.minNs * nb),
      `${hash.medianNs.toFixed(1)} (${hash.minNs.toFixed(1)})`, `${xxj.medianNs.toFixed(1)} (${xxj.minNs.toFixed(1)})`,
      `${fmtRatio(xxj.medianNs / hash.medianNs)} (${fmtRatio(xxj.minNs / hash.minNs)})`]);
  }
  log();
  log(`  copy floor ${fmtNs(m.copy.medianNs)} median (${fmtNs(m.copy.minNs)} min); cells are "median (min)", ratios of medians (of mins)`);
  log(table(["", "typical", "÷copy", "worst", "÷copy", "cold typical", "÷copy", "miss÷bypass", "half-new÷bypass", "hash*", "match*", "wrapper*", "ours ns/blk", "xxhash-wasm ns/blk", "xxhash-wasm÷ours"], rows).replace(/^/gm, "  "));
  log("  typical / worst: prompts routed before (the prompt memo supplies their hashes); cold: memo bypassed, every block hashed;");
  log("  miss÷bypass: a new prompt on every call (memo misses; a new block-0 key is only noted) over the same with the memo bypassed");
  log("  half-new÷bypass: first half seen, second half new on every call (half reused, each prompt remembered), over the same with the memo bypassed");
  log("  * memo bypassed, from minimums: hash = one-call hash_prompt × blocks; match = cold typical − unknown; wrapper = unknown − copy − hash (KvIndex.route's TS side)");
  log("  ours = XXH3 local + chained sequence hash in one WASM call; xxhash-wasm = XXH64 local hash only, one JS call per block");
  results.route = routeRes;
  return routeRes as RouteCost;
}
