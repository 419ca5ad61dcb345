/** The gateway config each replay policy runs with: kvgate's defaults for kv_*, the reference's for dynamo*, and the ablation options. */
import { describe, expect, it } from "vitest";
import { replayGatewayConfig } from "../../src/replay/policy-run.ts";
import { parseReplayArgs } from "../../src/replay/replay-args.ts";
import type { ReplayPolicy } from "../../src/replay/replay-policies.ts";
import { DEFAULT_CONFIG, REFERENCE_OVERLAP_WEIGHT } from "../../src/routing/router-config.ts";

function routerOf(policy: ReplayPolicy, args: string[] = []) {
  const cfg = parseReplayArgs(args);
  const fleet = { workers: 2, model: "m", engine: { blockSize: 64, numGpuBlocks: 1024, maxNumBatchedTokens: 8192, maxNumSeqs: 8, maxModelLen: 32768 } };
  return replayGatewayConfig({ policy, fleet: fleet as never, seed: 1, kvTuning: cfg.kvTuning }, [{ id: "w0", url: "http://w0" }, { id: "w1", url: "http://w1" }]).router;
}

describe("replay policy configs", () => {
  it("runs kvgate's policies with kvgate's defaults and the dynamo ones with the reference's weight and none of kvgate's additions", () => {
    expect(routerOf("kv_events")).toMatchObject({ overlapWeight: DEFAULT_CONFIG.overlapWeight, closedLoop: true, decodeAware: true, hotPrefixSpread: true, inflightCached: true });
    expect(routerOf("kv_approx")).toMatchObject({ overlapWeight: DEFAULT_CONFIG.overlapWeight, hotPrefixSpread: true });
    for (const p of ["dynamo", "dynamo_approx"] as const) {
      expect(routerOf(p)).toMatchObject({ overlapWeight: REFERENCE_OVERLAP_WEIGHT, newPrefillFactor: 1, inflightCached: false, closedLoop: false, decodeAware: false, hotPrefixSpread: false });
    }
    expect(DEFAULT_CONFIG.overlapWeight).not.toBe(REFERENCE_OVERLAP_WEIGHT);
  });

  it("applies --overlap-weight, --no-hot-prefix-spread and --no-closed-loop to the kv policies only", () => {
    const args = ["--overlap-weight", "4", "--no-hot-prefix-spread"];
    expect(routerOf("kv_events", args)).toMatchObject({ overlapWeight: 4, hotPrefixSpread: false, closedLoop: true });
    expect(routerOf("kv_approx", ["--no-closed-loop"])).toMatchObject({ closedLoop: false, decodeAware: true, hotPrefixSpread: true });
    expect(routerOf("dynamo", args)).toMatchObject({ overlapWeight: REFERENCE_OVERLAP_WEIGHT, hotPrefixSpread: false });
    expect(routerOf("kv_events", ["--no-inflight-cached", "--new-prefill-factor", "2"])).toMatchObject({ inflightCached: false, newPrefillFactor: 2 });
    expect(routerOf("dynamo", ["--new-prefill-factor", "2"])).toMatchObject({ newPrefillFactor: 1 });
    expect(parseReplayArgs([]).kvTuning).toEqual({});
    expect(() => parseReplayArgs(["--overlap-weight", "-1"])).toThrow();
  });
});
