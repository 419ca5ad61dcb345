/**
 * @module The core's prompt memo through the gateway: a conversation's turns reuse the hashes of the turns before
 * (kvgate_prompt_memo_blocks_total), routing decisions are the same with the memo off (--prompt-memo-mb 0).
 */
import { describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway } from "../../src/gateway/gateway.ts";
import { TOKEN } from "./helpers.ts";

async function gateway(extra: string[]) {
  const loaded = await loadGatewayConfig({
    argv: ["--admin-token", TOKEN, "--log", "off", "--block-size", "16", "--worker", "url=http://a.test,id=a,models=m", "--worker", "url=http://b.test,id=b,models=m", ...extra],
    env: {},
  });
  if (loaded.kind !== "config") throw new Error("help");
  const gw = await createGateway(loaded.config, { fetch: () => Promise.reject(new Error("no workers here")) });
  const route = async (messages: { role: string; content: string }[]) => {
    const r = await gw.fetch(new Request("http://kvgate.test/v1/route", { method: "POST", body: JSON.stringify({ model: "m", messages, commit: true }) }));
    expect(r.status).toBe(200);
    // Committed: booked as a dispatch would, so each turn's blocks count as cached where it went (approximate mode).
    const { request_id: _id, timings_ms: _t, plan_id: _p, expires_in_ms: _e, ...decision } = (await r.json()) as { request_id: string; timings_ms: unknown; plan_id: string; expires_in_ms: number; prompt_blocks: number; overlap_blocks: number };
    return decision;
  };
  const memo = async (): Promise<Record<string, number>> => {
    const text = await (await gw.fetch(new Request("http://kvgate.test/metrics"))).text();
    return Object.fromEntries([...text.matchAll(/^kvgate_prompt_memo_blocks_total\{outcome="(\w+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
  };
  const stats = async () => ((await (await gw.fetch(new Request("http://kvgate.test/v1/stats", { headers: { authorization: `Bearer ${TOKEN}` } }))).json()) as {
    router: { prompt_memo_reused_blocks: number; prompt_memo_hashed_blocks: number };
  }).router;
  return { gw, route, memo, stats };
}

/** Five turns of one conversation, each repeating the ones before, as chat clients send them. */
function conversation(): { role: string; content: string }[][] {
  const turns: { role: string; content: string }[][] = [];
  const history = [{ role: "system", content: "You answer questions about the solar system in detail. ".repeat(20) }];
  for (let t = 0; t < 5; t++) {
    history.push({ role: "user", content: `Question ${t}: tell me about planet number ${t + 1}, its moons and its orbit. `.repeat(8) });
    turns.push([...history]);
    history.push({ role: "assistant", content: `Planet ${t + 1} has many interesting features worth describing. `.repeat(10) });
  }
  return turns;
}

describe("prompt memo in the gateway", () => {
  it("should reuse earlier turns' hashes and decide exactly as without the memo", async () => {
    const on = await gateway([]), off = await gateway(["--prompt-memo-mb", "0"]);
    expect(await on.memo()).toEqual({ reused: 0, hashed: 0 });
    let blocks = 0, overlap = 0;
    for (const turn of conversation()) {
      const a = await on.route(turn), b = await off.route(turn);
      expect(a).toEqual(b);
      blocks += a.prompt_blocks;
      overlap += a.overlap_blocks;
    }
    expect(overlap).toBeGreaterThan(0);
    const m = await on.memo();
    expect(m.reused! + m.hashed!).toBe(blocks);
    // The first turn's block-0 key is new (noted only), the second is remembered, every later turn reuses what the
    // previous turn shared with it: well over half of all blocks.
    expect(m.reused!).toBeGreaterThan(blocks / 2);
    expect(await off.memo()).toEqual({ reused: 0, hashed: 0 });
    expect(await on.stats()).toMatchObject({ prompt_memo_reused_blocks: m.reused, prompt_memo_hashed_blocks: m.hashed });
  });
});
