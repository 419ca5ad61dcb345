/**
 * @module Router replicas over a real nats-server: KV events posted to one replica reach another's predictions,
 * bookings on one raise the load the other sees (and expire with its heartbeats), and both ride out a NATS restart.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { natsBus } from "../../src/adapter/node/nats-bus.ts";
import type { SimServer } from "../../src/adapter/node/sim-server.ts";
import { post, startSim, startTestGateway, TOKEN, type TestGateway } from "../gateway/helpers.ts";
import { NatsServer, natsServerPath } from "./nats-server.ts";
import { chatOf, ingest, metric, MODEL, route, storedFor, until } from "./replica-fixture.ts";

const HEARTBEAT_MS = 150;

const skip = natsServerPath === undefined;
if (skip) console.warn("replicas-nats: skipped, no nats-server binary on PATH (Debian: apt-get install nats-server)");

describe.skipIf(skip)("router replicas over NATS", () => {
  let nats: NatsServer;
  let sims: SimServer[];
  const open: { g: TestGateway; timer: ReturnType<typeof setInterval> }[] = [];

  async function replica(id: string, extra: string[] = []): Promise<{ g: TestGateway; stopTicks(): void }> {
    const kv = extra.includes("--kv-events") ? "" : ",kv_events=true";
    const workers = sims.flatMap((s, i) => ["--worker", `url=${s.url},id=w${i + 1},models=${MODEL}${kv}`]);
    const g = await startTestGateway(["--nats", nats.url, "--replica-id", id, "--replica-heartbeat-ms", String(HEARTBEAT_MS), "--health-check-ms", "0", ...workers, ...extra],
      { syncBus: natsBus, runtime: "Node" });
    const timer = setInterval(() => void g.gateway.tick()?.catch(() => {}), 25);
    open.push({ g, timer });
    if (!extra.join(" ").includes("--state-sharing off")) await until(`${id} connected`, () => metric(g, "kvgate_sync_connected"), (v) => v === 1);
    return { g, stopTicks: () => clearInterval(timer) };
  }

  const remoteOf = async (g: TestGateway) => {
    const body = (await (await fetch(`${g.url}/admin/workers`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as {
      data: { id: string; ranks: { active_requests: number; remote: { requests: number; blocks: number } }[] }[];
    };
    return Object.fromEntries(body.data.map((w) => [w.id, { local: w.ranks[0]!.active_requests, remote: w.ranks[0]!.remote.requests }]));
  };

  beforeAll(async () => {
    nats = await NatsServer.start();
    sims = await Promise.all([startSim(undefined, { speedupRatio: 1 }), startSim(undefined, { speedupRatio: 1 })]);
  }, 30_000);

  afterAll(async () => {
    for (const { g, timer } of open) {
      clearInterval(timer);
      await g.gateway.close().catch(() => {});
      await g.close();
    }
    await Promise.all(sims.map((s) => s.close()));
    await nats.dispose();
  }, 30_000);

  it("should make KV events posted to replica A predict the overlap on replica B, and not with --state-sharing off", async () => {
    const a = await replica("ra");
    const b = await replica("rb");
    const c = await replica("rc", ["--state-sharing", "off"]);
    const chat = chatOf("Replicas share what they know about caches. ");
    const { event, blocks } = storedFor(chat, 91_000n);
    expect(blocks).toBeGreaterThan(4);
    expect((await route(b.g, chat)).overlap_blocks).toBe(0);
    expect((await ingest(a.g, "w2", [event])).status).toBe(200);
    expect(await route(a.g, chat)).toMatchObject({ worker: "w2", overlap_blocks: blocks });
    const seen = await until("B to predict the overlap", () => route(b.g, chat), (r) => r.overlap_blocks === blocks);
    expect(seen.worker).toBe("w2");
    expect(await route(c.g, chat)).toMatchObject({ overlap_blocks: 0 });
    // A late replica reads the stream from its start.
    const d = await replica("rd");
    await until("late D to predict the overlap", () => route(d.g, chat), (r) => r.overlap_blocks === blocks && r.worker === "w2");
    expect(await metric(a.g, 'kvgate_sync_published_total{kind="kv_batch"}')).toBeGreaterThanOrEqual(1);
    expect(await metric(b.g, 'kvgate_sync_applied_total{kind="kv_batch"}')).toBeGreaterThanOrEqual(1);
    for (const r of [a, b, c, d]) r.stopTicks();
  }, 60_000);

  it("should share approximate-mode decisions: a prompt routed by A predicts its worker on B", async () => {
    const a = await replica("xa", ["--kv-events", "off"]);
    const b = await replica("xb", ["--kv-events", "off"]);
    const chat = chatOf("Approximate routers remember their own decisions. ");
    expect((await route(b.g, chat)).overlap_blocks).toBe(0);
    const r = await post(`${a.g.url}/v1/chat/completions`, { ...chat, max_tokens: 2 });
    expect(r.status).toBe(200);
    const chosen = (await route(a.g, chat));
    expect(chosen.overlap_blocks).toBeGreaterThan(4);
    await until("B to record A's decision", () => route(b.g, chat), (x) => x.overlap_blocks === chosen.overlap_blocks && x.worker === chosen.worker);
    expect(await metric(b.g, 'kvgate_sync_applied_total{kind="decision"}')).toBeGreaterThanOrEqual(1);
    a.stopTicks();
    b.stopTicks();
  }, 60_000);

  it("should keep A's running prompt in B's model past its lifetime while A streams it, and let it age once A frees it", async () => {
    const approx = ["--kv-events", "off", "--approx-ttl-ms", "1500"];
    const a = await replica("ta", approx);
    const b = await replica("tb", approx);
    const chat = chatOf("A long answer keeps its prompt in the engine's cache. ");
    const ctl = new AbortController();
    expect((await post(`${a.g.url}/v1/chat/completions`, { ...chat, stream: true, max_tokens: 4000 }, {}, ctl.signal)).status).toBe(200);
    // B sees A's stream loading the worker that holds the prompt, so it may route elsewhere: read the best overlap.
    const best = async () => ((await (await post(`${b.g.url}/v1/route`, chat)).json()) as { best_overlap_blocks: number }).best_overlap_blocks;
    const blocks = await until("B to record A's decision", best, (n) => n > 4);
    // Three lifetimes on, the stream still runs: B recorded the prompt again from A's booking, as it does its own.
    await new Promise((r) => setTimeout(r, 4_500));
    expect(await best()).toBe(blocks);
    expect(await metric(b.g, "kvgate_approx_blocks_refreshed_total")).toBeGreaterThanOrEqual(2 * blocks);
    ctl.abort();
    await until("B to let it age once A freed it", best, (n) => n === 0, 10_000);
    a.stopTicks();
    b.stopTicks();
  }, 60_000);

  it("should count A's in-flight request in B's load until A frees it, and drop it when A stops heartbeating", async () => {
    const a = await replica("la");
    const b = await replica("lb");
    const stream = (signal: AbortSignal) => post(`${a.g.url}/v1/chat/completions`, { ...chatOf("Hold this stream open for a while. "), stream: true, max_tokens: 4000 }, {}, signal);
    const first = new AbortController();
    const res = await stream(first.signal);
    expect(res.status).toBe(200);
    const onA = await until("A's booking", () => remoteOf(a.g), (m) => Object.values(m).some((w) => w.local === 1));
    const worker = Object.keys(onA).find((k) => onA[k]!.local === 1)!;
    await until("B to see A's booking", () => remoteOf(b.g), (m) => m[worker]!.remote === 1 && m[worker]!.local === 0);
    expect(await metric(b.g, "kvgate_sync_remote_bookings")).toBe(1);
    first.abort();
    await until("B to see it freed", () => remoteOf(b.g), (m) => m[worker]!.remote === 0);

    const second = new AbortController();
    expect((await stream(second.signal)).status).toBe(200);
    const held = await until("B to see the second booking", () => remoteOf(b.g), (m) => Object.values(m).some((w) => w.remote === 1));
    expect(Object.values(held).reduce((n, w) => n + w.remote, 0)).toBe(1);
    // A's sharing stops without freeing: B keeps the booking until A misses its heartbeats.
    a.stopTicks();
    await a.g.gateway.close();
    await until("B to expire A's booking", () => remoteOf(b.g), (m) => Object.values(m).every((w) => w.remote === 0));
    second.abort();
    b.stopTicks();
  }, 60_000);

  it("should keep routing while nats-server is down and share events posted during the outage once it is back", async () => {
    const a = await replica("oa");
    const b = await replica("ob");
    const chat = chatOf("Outages should not stop the routers. ");
    const { event, blocks } = storedFor(chat, 55_000n);
    await nats.stop();
    await until("A to notice the outage", () => metric(a.g, "kvgate_sync_connected"), (v) => v === 0);
    expect((await fetch(`${a.g.url}/ready`)).status).toBe(200);
    expect((await ingest(a.g, "w1", [event])).status).toBe(200);
    for (const g of [a.g, b.g]) {
      const r = await post(`${g.url}/v1/chat/completions`, { ...chat, max_tokens: 2 });
      expect(r.status).toBe(200);
    }
    expect((await route(b.g, chat)).overlap_blocks).toBe(0);
    await nats.restart();
    await until("B to predict the overlap after the outage", () => route(b.g, chat), (r) => r.overlap_blocks === blocks && r.worker === "w1", 30_000);
    const after = storedFor(chatOf("Events after the outage travel too. "), 66_000n);
    expect((await ingest(a.g, "w2", [after.event])).status).toBe(200);
    await until("B to see an event posted after the outage", () => route(b.g, chatOf("Events after the outage travel too. ")), (r) => r.overlap_blocks === after.blocks && r.worker === "w2", 30_000);
    a.stopTicks();
    b.stopTicks();
  }, 90_000);
});
