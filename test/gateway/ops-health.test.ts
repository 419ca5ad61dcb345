/**
 * @module Health checks and circuit breaking against real simulated engines over HTTP (a fault proxy in front of
 * one of them), with the gateway's clock driven by hand: a worker whose /health fails is drained — new requests go
 * elsewhere while its in-flight stream runs to the end — and comes back after passing again; repeated 5xx open its
 * circuit, which after the cooldown lets one trial through and closes on success. Everything shows in /metrics.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/routing/index.ts";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { post, startTestGateway, TOKEN, type TestGateway } from "./helpers.ts";
import { FaultProxy } from "./ops-proxy.ts";

const MODEL = "kvgate-sim";
const chat = (content: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 4, ...extra });

interface Setup {
  gw: TestGateway;
  clock: ManualClock;
  proxy: FaultProxy;
  sims: SimServer[];
}

let open: Setup | undefined;

afterEach(async () => {
  if (!open) return;
  await open.gw.close();
  await open.proxy.stop();
  await Promise.allSettled(open.sims.map((s) => s.close()));
  open = undefined;
});

/** Worker A behind the fault proxy, worker B direct; the gateway's clock is manual. */
async function setup(argv: string[], simOpts: Record<string, unknown> = {}): Promise<Setup> {
  const sims = [await startSimServer({ workerId: "A", speedupRatio: 50, ...simOpts }), await startSimServer({ workerId: "B", speedupRatio: 50, ...simOpts })];
  const proxy = new FaultProxy(sims[0]!.url);
  await proxy.listen();
  const clock = new ManualClock(1_000);
  const gw = await startTestGateway([
    "--worker", `url=${proxy.url},id=A,models=${MODEL}`, "--worker", `url=${sims[1]!.url},id=B,models=${MODEL}`, "--tick-ms", "60000", ...argv,
  ], { now: clock.now });
  open = { gw, clock, proxy, sims };
  return open;
}

async function tick(s: Setup, ms: number): Promise<void> {
  s.clock.advance(ms);
  await s.gw.gateway.tick();
}

async function workers(s: Setup): Promise<Record<string, { health: string; unreachable: boolean; circuit: string | null }>> {
  const body = (await (await fetch(`${s.gw.url}/admin/workers`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { data: { id: string; health: string; unreachable: boolean; circuit: string | null }[] };
  return Object.fromEntries(body.data.map((w) => [w.id, w]));
}

const metricsText = async (s: Setup) => (await fetch(`${s.gw.url}/metrics`)).text();

describe("active health checks", () => {
  it("should drain a worker failing /health (its stream finishes), route around it, and bring it back after passing", async () => {
    const s = await setup(["--health-check-ms", "5000", "--health-fail-threshold", "2", "--health-success-threshold", "2", "--circuit-failures", "0"], { speedupRatio: 5 });
    // A long stream pinned to A, read slowly below while A is drained.
    const stream = await post(`${s.gw.url}/v1/chat/completions`, chat("a long answer please", { stream: true, max_tokens: 40, kvgate: { worker_id: "A" } }));
    expect(stream.headers.get("x-kvgate-worker")).toBe("A");
    const reader = stream.body!.getReader();
    const dec = new TextDecoder();
    // Under load the whole stream can arrive in this first read: keep what it holds.
    let text = dec.decode((await reader.read()).value, { stream: true });

    s.proxy.faults.set("/health", 503);
    await tick(s, 5_000);
    expect((await workers(s)).A!.health).toBe("healthy");
    await tick(s, 5_000);
    expect((await workers(s)).A).toMatchObject({ health: "unhealthy", unreachable: true });
    // New requests avoid A; a request pinned to it is told why.
    for (let i = 0; i < 4; i++) expect((await post(`${s.gw.url}/v1/chat/completions`, chat(`q${i}`))).headers.get("x-kvgate-worker")).toBe("B");
    const pinned = await post(`${s.gw.url}/v1/chat/completions`, chat("pinned", { kvgate: { worker_id: "A" } }));
    expect(pinned.status).toBe(503);
    // The stream that started before runs to its end.
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += dec.decode(r.value, { stream: true });
    expect(text).toContain("data: [DONE]");
    expect(text).not.toContain('"error"');

    s.proxy.faults.delete("/health");
    await tick(s, 5_000);
    expect((await workers(s)).A!.health).toBe("unhealthy");
    await tick(s, 5_000);
    expect((await workers(s)).A).toMatchObject({ health: "healthy", unreachable: false });
    const m = await metricsText(s);
    expect(m).toContain('kvgate_worker_health_checks_total{result="fail",worker="A"} 2');
    expect(m).toContain('kvgate_worker_health_checks_total{result="ok",worker="A"} 2');
    expect(m).toContain('kvgate_worker_health_checks_total{result="ok",worker="B"} 4');
    expect(m).toContain('kvgate_worker_out_of_rotation{reason="health_check",worker="A"} 0');
  }, 30_000);

  it("should take a worker that refuses connections out at once and probe it until it listens again", async () => {
    const s = await setup(["--health-check-ms", "0", "--health-probe-ms", "2000", "--health-success-threshold", "1", "--circuit-failures", "0"]);
    const port = s.proxy.port;
    await s.proxy.stop();
    const res = await post(`${s.gw.url}/v1/chat/completions`, chat("retry me", { kvgate: { worker_id: "A" } }));
    expect(res.status).toBe(502);
    expect((await workers(s)).A).toMatchObject({ health: "unhealthy", unreachable: true });
    await tick(s, 2_000);
    expect((await workers(s)).A!.health).toBe("unhealthy");
    await s.proxy.listen(port);
    await tick(s, 2_000);
    expect((await workers(s)).A).toMatchObject({ health: "healthy", unreachable: false });
  }, 30_000);

  it("should leave a worker the operator drained alone, whatever its health checks say", async () => {
    const s = await setup(["--health-check-ms", "1000", "--health-fail-threshold", "1", "--health-success-threshold", "1", "--circuit-failures", "0"]);
    const patch = (health: string) => fetch(`${s.gw.url}/admin/workers/A`, { method: "PATCH", headers: { authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ health }) });
    expect((await patch("draining")).status).toBe(200);
    await tick(s, 1_000);
    expect((await workers(s)).A!.health).toBe("draining");
    expect((await patch("healthy")).status).toBe(200);
    s.proxy.faults.set("/health", 500);
    await tick(s, 1_000);
    expect((await workers(s)).A!.health).toBe("unhealthy");
    expect((await patch("draining")).status).toBe(200);
    s.proxy.faults.delete("/health");
    await tick(s, 1_000);
    expect((await workers(s)).A!.health).toBe("draining");
  }, 30_000);
});

describe("circuit breaker", () => {
  it("should open after repeated 5xx, keep the worker out for the cooldown, then close on a successful trial", async () => {
    const s = await setup(["--health-check-ms", "0", "--circuit-failures", "3", "--circuit-open-ms", "30000"]);
    s.proxy.faults.set("/v1/", 500);
    const pinned = () => post(`${s.gw.url}/v1/chat/completions`, chat("pinned", { kvgate: { worker_id: "A" } }));
    for (let i = 0; i < 2; i++) expect((await pinned()).status).toBe(502);
    expect((await workers(s)).A).toMatchObject({ health: "healthy", circuit: "closed" });
    expect((await pinned()).status).toBe(502);
    expect((await workers(s)).A).toMatchObject({ health: "unhealthy", circuit: "open" });
    expect((await pinned()).status).toBe(503);
    for (let i = 0; i < 3; i++) expect((await post(`${s.gw.url}/v1/chat/completions`, chat(`x${i}`))).headers.get("x-kvgate-worker")).toBe("B");

    await tick(s, 29_000);
    expect((await workers(s)).A!.circuit).toBe("open");
    await tick(s, 1_000);
    expect((await workers(s)).A).toMatchObject({ health: "healthy", circuit: "half_open" });
    // The trial fails: open again.
    expect((await pinned()).status).toBe(502);
    expect((await workers(s)).A).toMatchObject({ health: "unhealthy", circuit: "open" });
    await tick(s, 30_000);
    s.proxy.faults.delete("/v1/");
    const ok = await pinned();
    expect(ok.status).toBe(200);
    expect((await workers(s)).A).toMatchObject({ health: "healthy", circuit: "closed" });
    const m = await metricsText(s);
    expect(m).toContain('kvgate_circuit_breaker_transitions_total{to="open",worker="A"} 2');
    expect(m).toContain('kvgate_circuit_breaker_transitions_total{to="half_open",worker="A"} 2');
    expect(m).toContain('kvgate_circuit_breaker_transitions_total{to="closed",worker="A"} 1');
    expect(m).toContain('kvgate_circuit_breaker_state{worker="A"} 0');
    expect(m).toContain('kvgate_worker_attempt_failures_total{worker="A"} 4');
  }, 30_000);
});
