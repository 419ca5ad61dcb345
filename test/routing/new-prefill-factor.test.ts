/** The new-prefill factor: a block the prompt must prefill weighs more than one already queued on the worker. */
import { describe, expect, it } from "vitest";
import { resolveConfig } from "../../src/routing/router-config.ts";
import { BS, cache, fixture, prompt, worker } from "./helpers.ts";

async function holderBusy(newPrefillFactor: number) {
  const f = await fixture({ newPrefillFactor }, [worker("a", { kvEvents: true }), worker("b", { kvEvents: true })]);
  const p = prompt(1, 16 * BS, 1);
  cache(f.index, "a", 0, p, 16);
  // a holds the whole prompt but has 20 blocks of another prompt queued for prefill; b holds nothing and is idle.
  const load = await f.router.route({ requestId: "load", tokens: prompt(2, 20 * BS, 2), model: "m", target: { worker: "a" } });
  expect(load.kind).toBe("routed");
  return { f, p };
}

describe("new-prefill factor", () => {
  it("should keep the reference's cost at 1: 20 queued blocks outweigh 16 to prefill again", async () => {
    const { f, p } = await holderBusy(1);
    const q = await f.router.query({ requestId: "q", tokens: p, model: "m" });
    expect(q.worker).toBe("b");
    expect(q.potentialPrefillTokens).toBe(16 * BS);
  });

  it("should send the prompt to its cache at 2, where it waits but the fleet does not prefill it again", async () => {
    const { f, p } = await holderBusy(2);
    const q = await f.router.query({ requestId: "q", tokens: p, model: "m" });
    expect(q.worker).toBe("a");
    // Reported in tokens as they are: the 20 queued blocks, nothing new.
    expect(q.potentialPrefillTokens).toBe(20 * BS);
    expect(q.cost).toBe(2 * 16 * (10 + 0) + 36);
  });

  it("should refuse a factor below 1 or absurdly large", () => {
    expect(() => resolveConfig({ newPrefillFactor: 0.5 })).toThrow(/newPrefillFactor/);
    expect(() => resolveConfig({ newPrefillFactor: 100 })).toThrow(/newPrefillFactor/);
  });
});
