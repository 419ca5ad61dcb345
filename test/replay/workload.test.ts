import { describe, expect, it } from "vitest";
import { readMooncakeTrace } from "../../src/replay/mooncake-trace.ts";
import { WHOLE_TRACE, type ReplayRequest } from "../../src/replay/replay-request.ts";
import { promptTokens, segmentToken, SYNTHETIC_VOCAB } from "../../src/replay/synthetic-tokens.ts";
import { generateWorkload } from "../../src/replay/workload-generator.ts";

function startsWith(a: Uint32Array, prefix: Uint32Array): boolean {
  if (prefix.length > a.length) return false;
  for (let i = 0; i < prefix.length; i++) if (a[i] !== prefix[i]) return false;
  return true;
}

describe("synthetic tokens", () => {
  it("equal ids give equal tokens, so trace requests with equal leading hash ids share a token prefix", async () => {
    const t = await readMooncakeTrace([
      JSON.stringify({ timestamp: 0, input_length: 1100, output_length: 1, hash_ids: [1, 2, 3] }),
      JSON.stringify({ timestamp: 1, input_length: 1300, output_length: 1, hash_ids: [1, 2, 9] }),
      JSON.stringify({ timestamp: 2, input_length: 600, output_length: 1, hash_ids: [4, 2] }),
    ].join("\n"), WHOLE_TRACE);
    const [a, b, c] = t.requests.map(promptTokens);
    expect(a!.length).toBe(1100);
    expect(b!.subarray(0, 1024)).toEqual(a!.subarray(0, 1024));
    expect(b![1024]).not.toBe(a![1024]);
    // Same id at a different place in the prompt still means the same content, but not a shared prefix.
    expect(c!.subarray(0, 512)).not.toEqual(a!.subarray(0, 512));
    expect(c!.subarray(512, 600)).toEqual(a!.subarray(512, 600));
  });

  it("stays inside the vocabulary and does not repeat blocks across ids", () => {
    const seen = new Set<string>();
    for (let id = 0; id < 2000; id++) {
      const block = Array.from({ length: 16 }, (_, j) => segmentToken(id, j));
      expect(block.every((t) => Number.isInteger(t) && t >= 0 && t < SYNTHETIC_VOCAB)).toBe(true);
      seen.add(block.join(","));
    }
    expect(seen.size).toBe(2000);
    expect(segmentToken(2 ** 40 + 3, 0)).not.toBe(segmentToken(3, 0));
  });
});

describe("built-in workload generator", () => {
  it("is deterministic for a seed and differs across seeds", () => {
    const a = generateWorkload({ requests: 200, seed: 7 });
    expect(generateWorkload({ requests: 200, seed: 7 })).toEqual(a);
    expect(generateWorkload({ requests: 200, seed: 8 })).not.toEqual(a);
    expect(a).toHaveLength(200);
    expect(a.map((r) => r.index)).toEqual(a.map((_, i) => i));
    for (let i = 1; i < a.length; i++) expect(a[i]!.at).toBeGreaterThanOrEqual(a[i - 1]!.at);
    for (const r of a) {
      expect(r.inputLength).toBe(r.segments.reduce((n, s) => n + s.length, 0));
      expect(r.outputLength).toBeGreaterThan(0);
    }
  });

  it("each turn of a session extends the previous turn's prompt by its answer and a new message", () => {
    const reqs = generateWorkload({ requests: 400, seed: 1 });
    const bySession = new Map<string, ReplayRequest[]>();
    for (const r of reqs) bySession.set(r.session!, [...(bySession.get(r.session!) ?? []), r]);
    const multi = [...bySession.values()].filter((s) => s.length >= 3);
    expect(multi.length).toBeGreaterThan(10);
    for (const turns of multi) {
      for (let i = 1; i < turns.length; i++) {
        const prev = turns[i - 1]!, cur = turns[i]!;
        expect(cur.at).toBeGreaterThan(prev.at);
        expect(startsWith(promptTokens(cur), promptTokens(prev))).toBe(true);
        // The previous answer (as long as its output) follows the previous prompt.
        expect(cur.segments[prev.segments.length]!.length).toBe(prev.outputLength);
      }
    }
    expect([...bySession.keys()].some((k) => k.startsWith("agent-"))).toBe(true);
    expect([...bySession.keys()].some((k) => k.startsWith("chat-"))).toBe(true);
  });

  it("sessions share system prompts and tool definitions, the popular ones most", () => {
    const reqs = generateWorkload({ requests: 600, seed: 3 });
    const firsts = new Map<number, Set<string>>();
    for (const r of reqs) firsts.set(r.segments[0]!.id, (firsts.get(r.segments[0]!.id) ?? new Set()).add(r.session!));
    const counts = [...firsts.values()].map((s) => s.size).sort((x, y) => y - x);
    expect(counts.length).toBeLessThanOrEqual(6);
    expect(counts[0]).toBeGreaterThan(2 * counts[counts.length - 1]!);
    const agents = reqs.filter((r) => r.session!.startsWith("agent-"));
    const toolsets = new Set(agents.map((r) => r.segments[1]!.id));
    expect(toolsets.size).toBeGreaterThan(1);
    expect(toolsets.size).toBeLessThanOrEqual(4);
    expect(agents.every((r) => r.segments[1]!.length >= 2000)).toBe(true);
  });

  it("rejects nonsense options", () => {
    expect(() => generateWorkload({ requests: 0 })).toThrow(/requests/);
    expect(() => generateWorkload({ sessionsPerSec: 0 })).toThrow(/sessionsPerSec/);
    expect(() => generateWorkload({ agentShare: 2 })).toThrow(/agentShare/);
  });
});
