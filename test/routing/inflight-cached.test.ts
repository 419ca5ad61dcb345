/** A prompt sharing a prefix with one still in prefill on a KV-event worker counts those blocks as cached there. */
import { describe, expect, it } from "vitest";
import { BS, fixture, prompt, worker } from "./helpers.ts";

async function siblingQuery(inflightCached: boolean) {
  const f = await fixture({ inflightCached }, [worker("a", { kvEvents: true }), worker("b", { kvEvents: true })]);
  const first = prompt(1, 16 * BS, 1);
  // In flight on a and past its prefill (its first token is out), but no event has arrived: the index holds nothing.
  const r = await f.router.route({ requestId: "first", tokens: first, model: "m", target: { worker: "a" } });
  if (r.kind !== "routed") throw new Error(r.kind);
  r.handle.firstToken();
  const sibling = new Uint32Array(20 * BS);
  sibling.set(first);
  sibling.set(prompt(2, 4 * BS, 2), 16 * BS);
  return { f, q: await f.router.query({ requestId: "sibling", tokens: sibling, model: "m" }), sibling };
}

describe("in-flight blocks as cached", () => {
  it("should send a prompt to the worker already prefilling its prefix, and predict those blocks as hits", async () => {
    const { f, q, sibling } = await siblingQuery(true);
    expect(q).toMatchObject({ worker: "a", cachedTokens: 16 * BS });
    // Booked, it adds only its own four blocks of prefill to a's queue.
    const r = await f.router.route({ requestId: "s", tokens: sibling, model: "m" });
    expect(r.kind === "routed" && r.signals.worker).toBe("a");
    expect(f.router.snapshot().ranks.find((x) => x.worker === "a")!.activePrefillTokens).toBe(4 * BS);
  });

  it("should count only stored blocks when off, as the reference does: the prompt costs a full prefill everywhere", async () => {
    const { q } = await siblingQuery(false);
    expect(q).toMatchObject({ cachedTokens: 0, potentialPrefillTokens: 20 * BS });
  });
});
