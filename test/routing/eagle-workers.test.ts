/** EAGLE workers: their block hashes cover one token of the next block, so prompts routed to them are hashed that way. */
import { describe, expect, it } from "vitest";
import { parseWorker } from "../../src/gateway/config.ts";
import * as hooks from "../support/kv-index-hooks.ts";
import { BS, fixture, prompt, worker, type Fixture } from "./helpers.ts";

/** Makes `w` cache the first `blocks` blocks of `tokens` as its engine's KV events say, hashed with EAGLE windows or not. */
function cacheAs(f: Fixture, w: string, tokens: Uint32Array, blocks: number, eagle: boolean): void {
  const h = f.index.hash(tokens, { blockSize: BS, eagle });
  const stored = h.local.slice(0, blocks).map((local, i) => ({ hash: h.seq[i]!, local }));
  expect(hooks.stored(f.index, w, 0, null, stored)).toBe("applied");
}

async function cachedOn(f: Fixture, tokens: Uint32Array): Promise<{ worker: string; cachedTokens: number }> {
  const s = await f.router.query({ requestId: `q${tokens[0]}`, tokens, model: "m" });
  return { worker: s.worker, cachedTokens: s.cachedTokens };
}

describe("EAGLE workers", () => {
  it("match a prompt against blocks their engine stored with EAGLE windows (and only those)", async () => {
    const p = prompt(5, 10 * BS + 3, 5);
    const eagle = await fixture({}, [worker("a", { eagle: true }), worker("b", { eagle: true })]);
    cacheAs(eagle, "b", p, 8, true);
    expect(await cachedOn(eagle, p)).toEqual({ worker: "b", cachedTokens: 8 * BS });
    // The same events hashed as a plain worker's would match nothing on an EAGLE fleet, and the other way round.
    const plain = await fixture({}, [worker("a"), worker("b")]);
    cacheAs(plain, "b", p, 8, true);
    expect((await cachedOn(plain, p)).cachedTokens).toBe(0);
    cacheAs(eagle, "a", prompt(6, 10 * BS, 6), 8, false);
    expect((await cachedOn(eagle, prompt(6, 10 * BS, 6))).cachedTokens).toBe(0);
  });

  it("count the blocks an EAGLE prompt can fill: (tokens − 1) / block size", async () => {
    const f = await fixture({}, [worker("a", { eagle: true })]);
    const exact = prompt(7, 4 * BS, 7);
    cacheAs(f, "a", exact, 4, true);
    // 4 × BS tokens leave the fourth block without its next token: three blocks are hashed and matched.
    expect((await cachedOn(f, exact)).cachedTokens).toBe(3 * BS);
  });

  it("must agree within a model, and come from the worker configuration", async () => {
    const f = await fixture({}, [worker("a", { eagle: true })]);
    expect(() => f.router.addWorker(worker("b"))).toThrow(/EAGLE/);
    expect(() => f.router.addWorker(worker("c", { models: ["other"] }))).not.toThrow();
    expect(parseWorker("url=http://h:1,eagle=true")).toMatchObject({ eagle: true });
    expect(parseWorker({ url: "http://h:1", eagle: false })).toMatchObject({ eagle: false });
    expect(() => parseWorker("url=http://h:1,eagle=maybe")).toThrow("eagle");
  });
});
