/**
 * Hot-prefix spreading through the gateway: a system prompt carrying half of the booked work is restricted to 3 of
 * 4 workers and /metrics says so; --no-hot-prefix-spread turns it off (test/routing/hot-prefixes.test.ts shows the
 * choices it changes).
 */
import { describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway } from "../../src/gateway/gateway.ts";
import { ManualClock } from "../../src/routing/clock.ts";
import { FakeFleet } from "./fake-workers.ts";
import { TOKEN } from "./helpers.ts";

const SYSTEM = "You are the support assistant of a large shop; answer briefly and politely, citing the policy. ".repeat(3);

async function run(argv: string[]) {
  const clock = new ManualClock(50_000);
  const workers = ["w1", "w2", "w3", "w4"].flatMap((w) => ["--worker", `url=http://${w}.test,id=${w},models=m,kv_events=false`]);
  const loaded = await loadGatewayConfig({
    argv: ["--admin-token", TOKEN, "--log", "off", "--health-probe-ms", "0", "--health-check-ms", "0", "--queue-threshold", "none", ...workers, ...argv], env: {},
  });
  if (loaded.kind !== "config") throw new Error("help");
  const gw = await createGateway(loaded.config, { fetch: new FakeFleet().fetch, now: clock.now });
  const hotWorkers = new Set<string>();
  for (let i = 0; i < 200; i++) {
    clock.advance(20);
    const hot = i % 2 === 0;
    const messages = [
      { role: "system", content: hot ? SYSTEM : `Tenant ${i % 9} rules: ${"keep to the catalogue of this tenant, ".repeat(3)}` },
      { role: "user", content: `question number ${i}: ${"where is my parcel and when will it arrive? ".repeat(2)}` },
    ];
    const res = await gw.fetch(new Request("http://kvgate.test/v1/route", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m", messages, commit: true }),
    }));
    expect(res.status).toBe(200);
    const body = await res.json() as { worker: string };
    if (hot && i >= 80) hotWorkers.add(body.worker);
  }
  const metrics = await (await gw.fetch(new Request("http://kvgate.test/metrics"))).text();
  return { hotWorkers, metrics };
}

const series = (text: string, name: string): number | undefined => {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
};

describe("hot-prefix spreading over HTTP", () => {
  it("restricts the hot system prompt to 3 of 4 workers and counts it in /metrics", async () => {
    const { hotWorkers, metrics } = await run([]);
    expect(hotWorkers.size).toBeLessThanOrEqual(3);
    expect(series(metrics, 'kvgate_hot_prefixes{state="spread"}')).toBe(1);
    expect(series(metrics, "kvgate_hot_prefix_decisions_total")).toBeGreaterThan(50);
    expect(series(metrics, 'kvgate_hot_prefixes{state="tracked"}')).toBe(10);
  });

  it("is off with --no-hot-prefix-spread", async () => {
    const { metrics } = await run(["--no-hot-prefix-spread"]);
    expect(series(metrics, 'kvgate_hot_prefixes{state="spread"}')).toBeUndefined();
    expect(series(metrics, "kvgate_hot_prefix_decisions_total")).toBeUndefined();
  });
});
