/** The stats' queue panel through the HTTP surface: a 429 from the full admission queue and a 503 count in their interval. */
import { describe, expect, it } from "vitest";
import type { StatsBody } from "../../src/gateway/stats-snapshot.ts";
import { fakeGateway, type SeenRequest } from "./fake-workers.ts";
import { TOKEN } from "./helpers.ts";

const body = { model: "m", messages: [{ role: "user", content: "hold the line" }], max_tokens: 3 };
const hang = (r: SeenRequest) => new Promise<Response>((_, reject) => r.signal.addEventListener("abort", () => reject(r.signal.reason)));

describe("stats: rejections and errors", () => {
  it("counts a queue rejection (429) and a failed request (5xx) in the current interval", async () => {
    const { gw, fleet, call } = await fakeGateway(1, ["--queue-threshold", "0", "--queue-max-length", "0"], ",max_batched_tokens=1");
    const stats = async (): Promise<StatsBody> =>
      (await (await gw.fetch(new Request("http://kvgate.test/v1/stats", { headers: { authorization: `Bearer ${TOKEN}` } }))).json()) as StatsBody;
    fleet.scripts.set("w1", hang);
    const ac = new AbortController();
    const held = call("/v1/chat/completions", body, { signal: ac.signal });
    await new Promise((r) => setTimeout(r, 0));
    expect((await call("/v1/chat/completions", body)).status).toBe(429);
    ac.abort();
    await held;
    fleet.scripts.set("w1", () => new Response("engine on fire", { status: 500 }));
    const failed = await call("/v1/chat/completions", body);
    expect(failed.status).toBeGreaterThanOrEqual(500);
    const s = await stats();
    expect(s.series.rejected.at(-1)).toBe(1);
    expect(s.series.errors.at(-1)).toBe(1);
    expect(s.series.requests.at(-1)).toBe(2);
    expect(s.decisions_total).toBe(2);
  });
});
