/** @module Fixtures for the replay tests: a Mooncake-format chat trace with known sharing, a capturing Node host, and a synthetic result document. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../support/temp-dirs.ts";
import type { CompletionRecord } from "../../src/replay/completion-client.ts";
import type { PolicyRun } from "../../src/replay/policy-run.ts";
import type { ReplayHost } from "../../src/replay/replay-host.ts";
import { REPLAY_POLICIES } from "../../src/replay/replay-policies.ts";
import { policyResult, type ReplayResults } from "../../src/replay/replay-results.ts";
import { nodeReplayHost } from "../../src/adapter/node/replay-host.ts";

/**
 * Three conversations (A, B, C) sharing a two-block system prompt, four turns each, interleaved A1 B1 C1 A2 …, one
 * new 512-token block per turn, the last block partly filled, arrivals `gapMs` apart. With two workers, round-robin
 * sends consecutive turns of a conversation to different workers; a KV-aware router keeps them together.
 */
export function chatTrace(gapMs = 3000): string {
  const lines: string[] = [];
  const history = new Map<string, number[]>([["A", [0, 1, 10]], ["B", [0, 1, 20]], ["C", [0, 1, 30]]]);
  let t = 0, next = 100;
  for (let turn = 0; turn < 4; turn++) {
    for (const conv of ["A", "B", "C"]) {
      const ids = history.get(conv)!;
      if (turn > 0) ids.push(next++);
      lines.push(JSON.stringify({ timestamp: t, input_length: ids.length * 512 - 200, output_length: 4, hash_ids: ids }));
      t += gapMs;
    }
  }
  return `${lines.join("\n")}\n`;
}

export interface CapturingHost extends ReplayHost {
  dir: string;
  out: string[];
  err: string[];
  read(name: string): string;
}

/** The Node host with engines in this thread, stdout/stderr captured and files in a fresh temporary directory. */
export function capturingHost(fleet: "in-process" | "thread" = "in-process"): CapturingHost {
  const dir = tempDir("kvgate-replay-");
  const out: string[] = [], err: string[] = [];
  return {
    ...nodeReplayHost({ fleet }),
    stdout: (t) => void out.push(t),
    stderr: (t) => void err.push(t),
    stderrIsTTY: false,
    dir, out, err,
    read: (name) => readFileSync(join(dir, name), "utf8"),
  };
}

/** A result document with plausible numbers for every policy (no engines involved), for rendering tests. */
export function syntheticResults(): ReplayResults {
  const policies = REPLAY_POLICIES.map((policy, p) => {
    const records: CompletionRecord[] = Array.from({ length: 120 }, (_, i) => ({
      index: i, sentAt: i * 250, status: 200, promptTokens: 4000, cachedTokens: Math.round(4000 * Math.min(0.9, (0.1 + 0.15 * p) * (1 + i / 120))),
      ttftMs: (50 + ((i * 37) % 400)) * (8 - p), e2eMs: 2000 + i, completionTokens: 40, worker: `w${i % 4}`, predictedBlocks: p * 10, promptBlocks: 62,
    }));
    const run: PolicyRun = {
      policy, workers: ["w0", "w1", "w2", "w3"], records, gaps: Float64Array.from({ length: 500 }, (_, i) => 10 + (i % 13)),
      load: Array.from({ length: 60 }, (_, k) => ({ t: k * 500, running: [0, 1, 2, 3].map((w) => (k + w * (8 - p)) % 9), waiting: [0, 0, 1, 0], kvUsage: [0.1, 0.2, 0.3, 0.4] })),
      schedule: { started: 0, sent: 120, meanLateMs: 1, maxLateMs: 3 }, log: [],
    };
    return policyResult(run, 64);
  });
  return {
    kind: "kvgate-replay", version: 1, createdAt: "2026-01-01T00:00:00.000Z", command: "kvgate replay --synthetic", timeUnit: "engine ms",
    source: { kind: "generator", citation: "synthetic test data", requests: 120, skipped: 0 },
    fleet: { workers: 4, model: "kvgate-sim", engine: { numGpuBlocks: 4096, blockSize: 64 }, traceSpeedup: 1, engineSpeedup: 3, routerQueue: "off" },
    ceiling: { hitRate: 0.8, blocks: 16_384, blockSize: 64 },
    policies,
  };
}
