/**
 * @module Stream leases: a streamed response whose client stops pulling gives back its booking at the next
 * housekeeping after the lease (what workerd needs, as it can end a request without cancelling its body), and a
 * stream that is read, or whose pull waits on the worker, keeps it.
 */
import { describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway, type GatewayHost } from "../../src/gateway/gateway.ts";
import { DEFAULT_STREAM_LEASE_MS, StreamLeases } from "../../src/gateway/stream-leases.ts";
import { chatChunk, data, FakeFleet, sseResponse } from "./fake-workers.ts";

describe("StreamLeases", () => {
  it("should release a lease nobody pulled from for the lease, and only once", () => {
    const leases = new StreamLeases(1_000, 5_000);
    const freed: string[] = [];
    const a = leases.open(0, () => freed.push("a"))!;
    leases.open(0, () => freed.push("b"));
    a.pulling(500);
    a.pulled(600);
    expect(leases.sweep(999)).toBe(0);
    expect(leases.sweep(1_000)).toBe(1);
    expect(freed).toEqual(["b"]);
    expect(leases.sweep(1_599)).toBe(0);
    expect(leases.sweep(1_600)).toBe(1);
    expect(leases.sweep(100_000)).toBe(0);
    expect(freed).toEqual(["b", "a"]);
    expect(leases.expired).toBe(2);
    expect(leases.size).toBe(0);
  });

  it("should give a pull that waits on the worker the idle timeout on top of the lease", () => {
    const leases = new StreamLeases(1_000, 5_000);
    let freed = 0;
    leases.open(0, () => freed++)!.pulling(10);
    expect(leases.sweep(6_009)).toBe(0);
    expect(leases.sweep(6_010)).toBe(1);
    expect(freed).toBe(1);
  });

  it("should never release a closed lease, go on past a release that throws, and do nothing when off", () => {
    const leases = new StreamLeases(1_000, 0);
    let freed = 0;
    leases.open(0, () => freed++)!.close();
    leases.open(0, () => {
      throw new Error("boom");
    });
    leases.open(0, () => freed++);
    expect(leases.sweep(2_000)).toBe(2);
    expect(freed).toBe(1);
    const off = new StreamLeases(0, 0);
    expect(off.open(0, () => freed++)).toBeUndefined();
    expect(off.sweep(1e12)).toBe(0);
    expect(off.size).toBe(0);
  });
});

async function leasedGateway(argv: string[], host: GatewayHost = {}) {
  const fleet = new FakeFleet();
  let clock = 0;
  const loaded = await loadGatewayConfig({ argv: ["--log", "off", "--health-probe-ms", "0", "--worker", "url=http://w1.test,id=w1,models=m", ...argv], env: {} });
  if (loaded.kind !== "config") throw new Error("help");
  const gw = await createGateway(loaded.config, { fetch: fleet.fetch, now: () => clock, fineNow: () => clock, ...host });
  const stream = () => gw.fetch(new Request("http://kvgate.test/v1/chat/completions", {
    method: "POST", body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], stream: true, max_tokens: 10 }),
  }));
  return { gw, fleet, stream, advance: (ms: number) => (clock += ms) };
}

/** Lets the relay's pull settle (it reports the end of a pull a few microtasks after the read resolved). */
const settle = () => new Promise((r) => setTimeout(r, 0));

const parts = [data(chatChunk("a", "x")), data(chatChunk("a", "y")), data(chatChunk("a", "z", "stop")), data("[DONE]")];

describe("a streamed response on a lease", () => {
  it("should give back the booking of a stream its client stopped reading, and still finish it if the client returns", async () => {
    const { gw, fleet, stream, advance } = await leasedGateway(["--stream-lease-ms", "1000"]);
    fleet.scripts.set("w1", (r) => sseResponse({ parts }, r.signal));
    const reader = (await stream()).body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"x"');
    await settle();
    expect(gw.state.router.liveBookings).toBe(1);
    advance(999);
    await gw.tick();
    expect(gw.state.router.liveBookings).toBe(1);
    advance(1);
    await gw.tick();
    expect(gw.state.router.liveBookings).toBe(0);
    expect(gw.state.metrics.leasesExpired.get()).toBe(1);
    // The client was only slow: the rest of the stream still comes, and ending it frees nothing twice.
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    expect(rest).toContain("[DONE]");
    expect(gw.state.router.liveBookings).toBe(0);
    expect(gw.state.router.snapshot().ranks[0]!.activeRequests).toBe(0);
    expect(gw.state.leases.size).toBe(0);
  });

  it("should keep the booking while the client reads within the lease", async () => {
    const { gw, fleet, stream, advance } = await leasedGateway(["--stream-lease-ms", "1000"]);
    fleet.scripts.set("w1", (r) => sseResponse({ parts: parts.slice(0, 2), end: "hang" }, r.signal));
    const reader = (await stream()).body!.getReader();
    await reader.read();
    await settle();
    advance(900);
    await gw.tick();
    await reader.read();
    await settle();
    advance(900);
    await gw.tick();
    expect(gw.state.router.liveBookings).toBe(1);
    expect(gw.state.metrics.leasesExpired.get()).toBe(0);
    await reader.cancel();
    expect(gw.state.router.liveBookings).toBe(0);
    expect(gw.state.leases.size).toBe(0);
  });

  it("should lease only where the runtime drops gone clients, unless configured", async () => {
    expect((await leasedGateway([])).gw.state.leases.leaseMs).toBe(0);
    expect((await leasedGateway([], { dropsGoneClients: true })).gw.state.leases.leaseMs).toBe(DEFAULT_STREAM_LEASE_MS);
    expect((await leasedGateway(["--stream-lease-ms", "0"], { dropsGoneClients: true })).gw.state.leases.leaseMs).toBe(0);
  });
});
