/** `kvgate replay --gateway`: the option's parsing and defaults, and the round-robin front's turns and skips. */
import { describe, expect, it } from "vitest";
import { connectionRefused, GatewayFront } from "../../src/replay/gateway-front.ts";
import { parseReplayArgs } from "../../src/replay/replay-args.ts";

describe("--gateway options", () => {
  it("collects repeated and comma-separated URLs, with gateway-mode defaults", () => {
    const c = parseReplayArgs(["--gateway", "http://a:1,http://b:2/", "--gateway=http://c:3", "--requests", "5"]);
    expect(c.gateways).toEqual(["http://a:1", "http://b:2", "http://c:3"]);
    expect(c.policies).toEqual(["kv_events"]);
    expect(c.warmup).toBe(0);
    expect(c.engineSpeedup).toBe(1);
    const plain = parseReplayArgs([]);
    expect(plain).toMatchObject({ gateways: [], warmup: 50, engineSpeedup: 3 });
    expect(plain.policies.length).toBeGreaterThan(1);
  });

  it("refuses what is not an http(s) URL, an empty list, and several policies", () => {
    expect(() => parseReplayArgs(["--gateway", "nope"])).toThrow(/not a URL/);
    expect(() => parseReplayArgs(["--gateway", "ftp://x"])).toThrow(/http/);
    expect(() => parseReplayArgs(["--gateway", ","])).toThrow(/no URL/);
    expect(() => parseReplayArgs(["--gateway"])).toThrow(/needs a value/);
    expect(() => parseReplayArgs(["--gateway", "http://a:1", "--policies", "kv_events,round_robin"])).toThrow(/one policy/);
    expect(parseReplayArgs(["--gateway", "http://a:1", "--policies", "kv_approx"]).policies).toEqual(["kv_approx"]);
  });
});

describe("gateway front", () => {
  it("goes round-robin, leaves a refusing gateway out for a while, then tries it again", () => {
    let now = 0;
    const f = new GatewayFront({ urls: ["http://a", "http://b", "http://c"], now: () => now, downForMs: 100 });
    expect([f.pick(), f.pick(), f.pick(), f.pick()]).toEqual([0, 1, 2, 0]);
    f.refusedBy(1);
    expect([f.pick(), f.pick(), f.pick()]).toEqual([2, 0, 2]);
    now = 100;
    expect([f.pick(), f.pick()]).toEqual([0, 1]);
    expect(f.refused).toEqual([0, 1, 0]);
  });

  it("still picks someone when every gateway is left out", () => {
    const f = new GatewayFront({ urls: ["http://a", "http://b"], now: () => 0, downForMs: 1000 });
    f.refusedBy(0);
    f.refusedBy(1);
    expect([f.pick(), f.pick(), f.pick()]).toEqual([0, 1, 0]);
  });

  it("tells a refused connection from other failures", () => {
    expect(connectionRefused(Object.assign(new TypeError("fetch failed"), { cause: { code: "ECONNREFUSED" } }))).toBe(true);
    expect(connectionRefused(new Error("connect ECONNREFUSED 127.0.0.1:1"))).toBe(true);
    expect(connectionRefused(Object.assign(new TypeError("fetch failed"), { cause: { code: "ECONNRESET" } }))).toBe(false);
    expect(connectionRefused(undefined)).toBe(false);
  });
});
