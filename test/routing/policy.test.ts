import { describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway } from "../../src/gateway/gateway.ts";
import { DEFAULT_CONFIG, resolveConfig } from "../../src/routing/router-config.ts";
import type { RouteRequest } from "../../src/routing/routing-types.ts";
import { cache, fixture, prompt, worker, type Fixture } from "./helpers.ts";

async function route(f: Fixture, req: RouteRequest): Promise<string> {
  const out = await f.router.route(req);
  if (out.kind !== "routed") throw new Error(`expected routed, got ${out.kind}`);
  return out.signals.worker;
}

const three = () => [worker("w1"), worker("w2"), worker("w3")];

describe("routing policy option", () => {
  it("defaults to the KV cost function and rejects unknown names", () => {
    expect(DEFAULT_CONFIG.policy).toBe("kv");
    expect(resolveConfig({}).policy).toBe("kv");
    expect(resolveConfig({ policy: "least_loaded" }).policy).toBe("least_loaded");
    expect(() => resolveConfig({ policy: "fastest" as never })).toThrow(/unknown routing policy fastest/);
  });

  it("kv follows the cache, the baselines ignore it", async () => {
    const tokens = prompt(1, 160, 1);
    const kv = await fixture({}, three());
    cache(kv.index, "w3", 0, tokens, 10);
    expect(await route(kv, { requestId: "a", tokens, model: "m" })).toBe("w3");
    const rr = await fixture({ policy: "round_robin" }, three());
    cache(rr.index, "w3", 0, tokens, 10);
    expect(await route(rr, { requestId: "a", tokens, model: "m" })).toBe("w1");
  });
});

describe("round_robin", () => {
  it("cycles through the workers in registration order; query-only calls do not advance it", async () => {
    const f = await fixture({ policy: "round_robin" }, three());
    const seen: string[] = [];
    for (let i = 0; i < 7; i++) {
      if (i === 3) expect((await f.router.query({ requestId: "q", tokens: prompt(9, 64, 9), model: "m" })).worker).toBe("w1");
      seen.push(await route(f, { requestId: `r${i}`, tokens: prompt(i, 64, i), model: "m" }));
    }
    expect(seen).toEqual(["w1", "w2", "w3", "w1", "w2", "w3", "w1"]);
    // Every booking is real: the load shows on each worker.
    expect(f.router.snapshot().ranks.map((r) => r.activeRequests)).toEqual([3, 2, 2]);
  });

  it("an explicit target still wins over the policy", async () => {
    const f = await fixture({ policy: "round_robin" }, three());
    expect(await route(f, { requestId: "t", tokens: prompt(1, 64, 1), model: "m", target: { worker: "w3" } })).toBe("w3");
    expect(await route(f, { requestId: "n", tokens: prompt(2, 64, 2), model: "m" })).toBe("w1");
  });
});

describe("random", () => {
  it("is reproducible for a seed and spreads over every worker", async () => {
    const run = async () => {
      const f = await fixture({ policy: "random" }, three());
      const out: string[] = [];
      for (let i = 0; i < 60; i++) out.push(await route(f, { requestId: `r${i}`, tokens: prompt(1, 64, 1), model: "m" }));
      return out;
    };
    const a = await run();
    expect(await run()).toEqual(a);
    for (const w of ["w1", "w2", "w3"]) expect(a.filter((x) => x === w).length).toBeGreaterThan(5);
  });
});

describe("least_loaded", () => {
  it("picks the fewest in-flight requests, then the fewest active blocks, whatever the cache holds", async () => {
    const f = await fixture({ policy: "least_loaded" }, three());
    const tokens = prompt(1, 160, 1);
    cache(f.index, "w1", 0, tokens, 10);
    await route(f, { requestId: "long", tokens: prompt(7, 320, 7), model: "m", target: { worker: "w1" } });
    await route(f, { requestId: "short", tokens: prompt(8, 32, 8), model: "m", target: { worker: "w2" } });
    // w3 is idle.
    expect(await route(f, { requestId: "a", tokens, model: "m" })).toBe("w3");
    // All hold one request now; w2's is the shortest (2 blocks vs 20 and 10).
    expect(await route(f, { requestId: "b", tokens: prompt(2, 64, 2), model: "m" })).toBe("w2");
    f.router.release("long");
    expect(await route(f, { requestId: "c", tokens, model: "m" })).toBe("w1");
  });

  it("shares exact ties between workers", async () => {
    const f = await fixture({ policy: "least_loaded" }, three());
    const firsts = new Set<string>();
    for (let i = 0; i < 30; i++) {
      const id = `r${i}`;
      firsts.add(await route(f, { requestId: id, tokens: prompt(1, 64, 1), model: "m" }));
      f.router.release(id);
    }
    expect(firsts.size).toBe(3);
  });
});

describe("gateway wiring", () => {
  it("takes --routing-policy (default kv) and hands it to the router", async () => {
    const load = async (argv: string[]) => {
      const r = await loadGatewayConfig({ argv, env: {}, readFile: async () => "" });
      if (r.kind !== "config") throw new Error("help");
      return r.config;
    };
    expect((await load([])).router.policy).toBe("kv");
    await expect(load(["--routing-policy", "fastest"])).rejects.toThrow(/routing-policy/);
    const config = await load(["--routing-policy", "least_loaded", "--log", "off"]);
    const gw = await createGateway(config, { log: () => {} });
    expect(gw.state.router.config.policy).toBe("least_loaded");
  });
});
