/**
 * The gateway sizes its KV index from the configured fleet: the start-up log line, /v1/stats and /metrics show the
 * chosen size; an explicit --index-capacity wins; a worker added through the admin API that outgrows it is warned
 * about and counted.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { StatsBody } from "../../src/gateway/stats-snapshot.ts";
import { createGateway } from "../../src/gateway/gateway.ts";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { addWorker, startTestGateway, TOKEN, type TestGateway } from "./helpers.ts";

const auth = { authorization: `Bearer ${TOKEN}` };

describe("KV index sized from the fleet", () => {
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.close();
    await gw?.gateway.close();
    gw = undefined;
  });

  const start = async (argv: string[]): Promise<string[]> => {
    const lines: string[] = [];
    gw = await startTestGateway([...argv, "--log", "info", "--health-check-ms", "0"], { log: (l) => lines.push(l) });
    return lines;
  };
  const stats = async (): Promise<StatsBody> => (await (await fetch(`${gw!.url}/v1/stats`, { headers: auth })).json()) as StatsBody;
  const metric = async (name: string): Promise<string[]> =>
    (await (await fetch(`${gw!.url}/metrics`)).text()).split("\n").filter((l) => l.startsWith(name));

  it("follows the configured workers' total KV blocks, logs the size at start and shows it in /v1/stats and /metrics", async () => {
    const lines = await start([
      "--worker", "url=http://w1.test,id=w1,models=m,kv_events=http,total_kv_blocks=8000",
      "--worker", "url=http://w2.test,id=w2,models=m,kv_events=http,total_kv_blocks=4000,dp_size=2",
      "--worker", "url=http://w3.test,id=w3,models=m,kv_events=false,total_kv_blocks=1000",
    ]);
    // (8000 + 2 × 4000) × 1.25 + 1000 × 2
    const want = 22_000;
    expect(lines.find((l) => l.includes("KV index:"))).toMatch(
      new RegExp(`^kvgate info: KV index: ${want} entries, sized from the fleet's 17000 KV blocks .*; ~\\d+ MB reserved$`));
    expect(gw!.gateway.state.index.options.capacity).toBe(want);
    expect((await stats()).router.index_capacity).toBe(want);
    expect(await metric("kvgate_index_capacity_entries")).toEqual([`kvgate_index_capacity_entries{source="fleet"} ${want}`]);
    expect(await metric("kvgate_index_outgrown_total")).toEqual(["kvgate_index_outgrown_total 0"]);
    expect(lines.some((l) => l.startsWith("kvgate warn:"))).toBe(false);
  });

  it("changes with the fleet", async () => {
    await start(["--worker", "url=http://w1.test,id=w1,models=m,kv_events=http,total_kv_blocks=100000"]);
    expect((await stats()).router.index_capacity).toBe(125_000);
  });

  it("lets --index-capacity win over the fleet", async () => {
    const lines = await start(["--index-capacity", "4096", "--worker", "url=http://w1.test,id=w1,models=m,kv_events=http,total_kv_blocks=8000"]);
    expect((await stats()).router.index_capacity).toBe(4096);
    expect(lines.find((l) => l.includes("KV index:"))).toContain("4096 entries, set by --index-capacity");
    // The configured fleet already calls for more than the flag gives: said at start.
    expect(lines.filter((l) => l.startsWith("kvgate warn:") && l.includes("fixed at start"))).toHaveLength(1);
  });

  it("keeps today's default when no worker states its size", async () => {
    const lines = await start(["--worker", "url=http://w1.test,id=w1,models=m,kv_events=http"]);
    expect((await stats()).router.index_capacity).toBe(1 << 18);
    expect(await metric("kvgate_index_capacity_entries")).toEqual([`kvgate_index_capacity_entries{source="default"} ${1 << 18}`]);
    expect(lines.find((l) => l.includes("KV index:"))).toContain("default: no configured worker states total_kv_blocks");
  });

  it("warns and counts when workers added through the admin API outgrow the size fixed at start", async () => {
    const lines = await start(["--worker", "url=http://w1.test,id=w1,models=m,kv_events=http,total_kv_blocks=4000"]);
    expect((await stats()).router.index_capacity).toBe(5000);
    expect((await addWorker(gw!.url, { url: "http://w2.test", id: "w2", models: ["m"], kv_events: "http", total_kv_blocks: 8000 })).status).toBe(201);
    expect(await metric("kvgate_index_outgrown_total")).toEqual(["kvgate_index_outgrown_total 1"]);
    expect(lines.filter((l) => l.startsWith("kvgate warn: worker w2: the fleet now calls for 15000 KV index entries (12000 KV blocks) but the index holds 5000"))).toHaveLength(1);
    expect((await stats()).router.index_capacity).toBe(5000);
  });

  it("sizes for the built-in simulated fleet when the adapter starts one", async () => {
    const loaded = await loadGatewayConfig({ argv: ["--log", "off", "--sim-workers", "3", "--sim-gpu-blocks", "2048"], env: {} });
    if (loaded.kind !== "config") throw new Error("help");
    const withSims = await createGateway(loaded.config, { builtInFleet: true });
    const without = await createGateway(loaded.config);
    try {
      expect(withSims.state.index.options.capacity).toBe(3 * 2048 * 1.25);
      expect(without.state.index.options.capacity).toBe(1 << 18);
    } finally {
      await withSims.close();
      await without.close();
    }
  });
});
