/**
 * @module The circuit breaker's half-open state admits exactly one trial: while it is in flight every other request
 * goes elsewhere; 429 is no verdict on the worker (another trial may go), and the state machine on its own clock.
 */
import { describe, expect, it } from "vitest";
import { CircuitBreaker } from "../../src/gateway/circuit-breaker.ts";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway } from "../../src/gateway/gateway.ts";
import { ManualClock } from "../../src/routing/index.ts";
import { chatChunk, FakeFleet } from "./fake-workers.ts";

const ok = () => Response.json({ ...chatChunk("x", "hi"), object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }] });

describe("CircuitBreaker", () => {
  it("should open after N consecutive failures only, and half-open after the cooldown", () => {
    const clock = new ManualClock();
    const b = new CircuitBreaker({ failures: 3, openMs: 100 }, clock.now);
    b.failure();
    b.failure();
    b.success();
    expect(b.failure()).toBeUndefined();
    expect(b.failure()).toBeUndefined();
    expect(b.failure()).toBe("open");
    expect(b.admits).toBe(false);
    clock.advance(99);
    expect(b.poll()).toBeUndefined();
    clock.advance(1);
    expect(b.poll()).toBe("half_open");
    expect(b.admits).toBe(true);
    expect(b.booked()).toBe(true);
    expect(b.admits).toBe(false);
    expect(b.booked()).toBe(false);
    b.inconclusive();
    expect(b.admits).toBe(true);
    expect(b.booked()).toBe(true);
    expect(b.success()).toBe("closed");
    expect(new CircuitBreaker({ failures: 0, openMs: 1 }, clock.now).failure()).toBeUndefined();
  });
});

describe("half-open trial in the gateway", () => {
  it("should send one trial to the recovering worker and every other request elsewhere until it answers", async () => {
    const fleet = new FakeFleet();
    const clock = new ManualClock(1_000);
    const loaded = await loadGatewayConfig({
      argv: ["--log", "off", "--health-check-ms", "0", "--health-probe-ms", "0", "--circuit-failures", "1", "--circuit-open-ms", "1000", "--tick-ms", "60000",
        "--worker", "url=http://a.test,id=a,models=m", "--worker", "url=http://b.test,id=b,models=m"],
      env: {},
    });
    if (loaded.kind !== "config") throw new Error("help");
    const gw = await createGateway(loaded.config, { fetch: fleet.fetch, now: clock.now });
    const call = (extra: Record<string, unknown> = {}) => Promise.resolve(gw.fetch(new Request("http://kvgate.test/v1/chat/completions", {
      method: "POST", body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hello there" }], ...extra }),
    })));
    fleet.scripts.set("b", ok);
    fleet.scripts.set("a", () => new Response("down", { status: 502 }));
    expect((await call({ kvgate: { worker_id: "a" } })).status).toBe(502);
    expect(gw.state.health.circuitState("a")).toBe("open");
    clock.advance(1_000);
    await gw.tick();
    expect(gw.state.health.circuitState("a")).toBe("half_open");

    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    fleet.scripts.set("a", async () => {
      await held;
      return ok();
    });
    const trial = call({ kvgate: { worker_id: "a" } });
    await new Promise((r) => setTimeout(r, 10));
    expect(fleet.calls().filter((c) => c.worker === "a")).toHaveLength(2);
    // While the trial runs, a is out of rotation: unpinned requests all go to b, pinned ones are refused.
    for (let i = 0; i < 4; i++) expect((await call()).headers.get("x-kvgate-worker")).toBe("b");
    expect((await call({ kvgate: { worker_id: "a" } })).status).toBe(503);
    release();
    expect((await trial).status).toBe(200);
    expect(gw.state.health.circuitState("a")).toBe("closed");
    expect(gw.state.router.snapshot().ranks.find((r) => r.worker === "a")!.health).toBe("healthy");
  });
});
