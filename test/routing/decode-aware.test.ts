/** Decode-aware load: a booking counts the blocks its answer will grow to, which moves the next choice. */
import { describe, expect, it } from "vitest";
import { BS, fixture, prompt, worker } from "./helpers.ts";

async function routeThree(decodeAware: boolean) {
  const f = await fixture({ decodeAware }, [worker("a"), worker("b")]);
  // Two in-flight requests with equal prompts: one on each worker, one of them expected to answer at length.
  const long = await f.router.route({ requestId: "long", tokens: prompt(1, 4 * BS, 1), model: "m", target: { worker: "a" }, maxTokens: 64 * BS });
  const short = await f.router.route({ requestId: "short", tokens: prompt(2, 4 * BS, 2), model: "m", target: { worker: "b" }, maxTokens: BS });
  const next = await f.router.route({ requestId: "next", tokens: prompt(3, 4 * BS, 3), model: "m" });
  return { f, long, short, next };
}

describe("decode-aware load", () => {
  it("counts the expected output blocks of each booking and sends the next request away from the long answer", async () => {
    const { f, long, next } = await routeThree(true);
    const snap = f.router.snapshot().ranks;
    const a = snap.find((r) => r.worker === "a")!, b = snap.find((r) => r.worker === "b")!;
    expect(a.expectedOutputBlocks).toBe(64);
    // The next request names no max_tokens and the fleet has no answers yet: it adds nothing.
    expect(b.expectedOutputBlocks).toBe(1);
    expect(next.kind === "routed" && next.signals.worker).toBe("b");
    if (long.kind === "routed") long.handle.finish();
    expect(f.router.snapshot().ranks.find((r) => r.worker === "a")!.expectedOutputBlocks).toBe(0);
  });

  it("counts prompt blocks only when off, as the reference router does", async () => {
    const { f } = await routeThree(false);
    expect(f.router.snapshot().ranks.every((r) => r.expectedOutputBlocks === 0)).toBe(true);
  });

  it("learns a session's answer length from reported usage", async () => {
    const f = await fixture({}, [worker("a")]);
    f.router.reportUsage({ worker: "a", dpRank: 0, predictedTokens: 0, reportedTokens: 0, promptTokens: 10, completionTokens: 8 * BS, sessionId: "s" });
    const r = await f.router.route({ requestId: "r", tokens: prompt(1, 2 * BS, 1), model: "m", sessionId: "s" });
    expect(r.kind).toBe("routed");
    expect(f.router.snapshot().ranks[0]!.expectedOutputBlocks).toBe(8);
  });
});
