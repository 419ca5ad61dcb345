/** @module Section 4 of the index bench: the cost of routing one 8k-token prompt, as a multiple of copying its tokens into WASM. */
import xxhash from "xxhash-wasm";
import { BASE_SEED } from "../../src/core/hash-seeds.ts";
import { describe, fmtNs, fmtRatio, measure, table } from "../harness.ts";
import * as hooks from "../../test/support/kv-index-hooks.ts";
import type { Run } from "./args.ts";
import { rawHasher, routeSetup } from "./route-setup.ts";

/** Per block size (`bs16`, `bs64`): medians and minimums of the route rows and their ratios to the copy floor. */
export type RouteCost = Record<string, { typicalOverCopy: number; typicalOverCopyMin: number }>;

/** Section 4: route (copy + hash + match + read) at block sizes 16 and 64, the copy floor, and hashing alone. */
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
      const got = ridx.route(tk, { blockSize: bs });
      let deepest = 0;
      for (let i = 0; i < got; i++) deepest = Math.max(deepest, ridx.matches.depth(i));
      if (got !== expect || deepest !== (expect ? nb : 0)) log(`  ! route check bs=${bs} ${kind}: ${got} slots matched (expected ${expect}), deepest ${deepest} (expected ${nb})`);
      const what = kind === "unknown" ? "copy + hash + match (exits at block 0: prompt unknown)" : `copy + hash + match + read ${expect} scores`;
      m[`route${bs}${kind}`] = measure(`route bs=${bs} ${kind}: ${what}`, (n) => {
        let a = 0;
        for (let i = 0; i < n; i++) {
          const k = ridx.route(tk, { blockSize: bs });
          for (let j = 0; j < k; j++) a += ridx.matches.slot(j) + ridx.matches.depth(j);
        }
        return a;
      }, { samples: S });
      log("  " + describe(m[`route${bs}${kind}`]!));
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
    const typ = m[`route${bs}typical`]!, worst = m[`route${bs}worst`]!, unk = m[`route${bs}unknown`]!;
    const hash = m[`hash${bs}`]!, xxj = m[`xxh64js${bs}`]!;
    // The breakdown uses the minimum of each item (the capability: least disturbed by other processes on the box).
    routeRes[`bs${bs}`] = {
      blocks: nb,
      typicalNs: typ.medianNs, typicalMinNs: typ.minNs, worstNs: worst.medianNs, worstMinNs: worst.minNs, unknownPromptNs: unk.medianNs,
      copyNs: m.copy.medianNs, copyMinNs: m.copy.minNs,
      typicalOverCopy: typ.medianNs / m.copy.medianNs, typicalOverCopyMin: typ.minNs / m.copy.minNs,
      worstOverCopy: worst.medianNs / m.copy.medianNs, worstOverCopyMin: worst.minNs / m.copy.minNs,
      hashNsPerBlock: hash.medianNs, hashMinNsPerBlock: hash.minNs, xxhashWasmNsPerBlock: xxj.medianNs, xxhashWasmMinNsPerBlock: xxj.minNs,
      // From minimums: typical − unknown = the find_matches walk + reading 8 scores; unknown − copy − hash = TS wrapper + call.
      breakdownMinNs: { copy: m.copy.minNs, hash: hash.minNs * nb, match: typ.minNs - unk.minNs, wrapper: unk.minNs - m.copy.minNs - hash.minNs * nb },
    };
    rows.push([`bs=${bs}`, `${fmtNs(typ.medianNs)} (${fmtNs(typ.minNs)})`, `${fmtRatio(typ.medianNs / m.copy.medianNs)} (${fmtRatio(typ.minNs / m.copy.minNs)})`,
      `${fmtNs(worst.medianNs)}`, `${fmtRatio(worst.medianNs / m.copy.medianNs)} (${fmtRatio(worst.minNs / m.copy.minNs)})`,
      fmtNs(hash.minNs * nb), fmtNs(typ.minNs - unk.minNs), fmtNs(unk.minNs - m.copy.minNs - hash.minNs * nb),
      `${hash.medianNs.toFixed(1)} (${hash.minNs.toFixed(1)})`, `${xxj.medianNs.toFixed(1)} (${xxj.minNs.toFixed(1)})`,
      `${fmtRatio(xxj.medianNs / hash.medianNs)} (${fmtRatio(xxj.minNs / hash.minNs)})`]);
  }
  log();
  log(`  copy floor ${fmtNs(m.copy.medianNs)} median (${fmtNs(m.copy.minNs)} min); cells are "median (min)", ratios of medians (of mins)`);
  log(table(["", "typical", "÷copy", "worst", "÷copy", "hash*", "match*", "wrapper*", "ours ns/blk", "xxhash-wasm ns/blk", "xxhash-wasm÷ours"], rows).replace(/^/gm, "  "));
  log("  * from minimums: hash = one-call hash_prompt × blocks; match = typical − unknown prompt; wrapper = unknown − copy − hash (KvIndex.route's TS side)");
  log("  ours = XXH3 local + chained sequence hash in one WASM call; xxhash-wasm = XXH64 local hash only, one JS call per block");
  results.route = routeRes;
  return routeRes as RouteCost;
}
