/**
 * @module Gateway configuration: defaults from the option table, the three sources and their order, the flag and
 * JSON forms of workers and tokenizers, validation, and `kvgate serve --help` documenting every option.
 */
import { describe, expect, it } from "vitest";
import { runCli } from "../../src/cli/main.ts";
import { loadGatewayConfig, serveHelp } from "../../src/gateway/config-load.ts";
import { OPTIONS, envName } from "../../src/gateway/config-options.ts";
import { defaultConfig, parseWorker, type GatewayConfig } from "../../src/gateway/config.ts";

async function load(argv: string[], env: Record<string, string> = {}, files: Record<string, string> = {}): Promise<GatewayConfig> {
  const r = await loadGatewayConfig({ argv, env, readFile: async (p) => {
    if (!(p in files)) throw new Error(`ENOENT ${p}`);
    return files[p]!;
  } });
  if (r.kind !== "config") throw new Error("help");
  return r.config;
}

describe("gateway config", () => {
  it("should default every option to the table's default", async () => {
    const c = await load([]);
    expect(c).toEqual(defaultConfig());
    expect(c).toMatchObject({ host: "127.0.0.1", port: 8080, adminToken: "", maxBodyBytes: 16 << 20, workers: [], tokenizers: {} });
    expect(c.router).toMatchObject({ overlapWeight: 16, queueThreshold: 4, sessionHeader: "x-session-id" });
    expect(c.upstream).toEqual({ headersTimeoutMs: 300_000, idleTimeoutMs: 120_000, retries: 2, migrationLimit: 3, streamUsage: true, healthProbeMs: 2_000,
      hedgeBudget: 0, hedgeQuantile: 0.95, hedgeMinSamples: 50 });
  });

  it("should layer JSON file < environment < flags, a higher source replacing the whole value", async () => {
    const file = JSON.stringify({ port: 1, log: "warn", router: { temperature: 0.5, queueThreshold: "off" }, workers: [{ url: "http://a:1", models: ["m"] }] });
    const c = await load(["--port", "3", "--config", "/etc/kvgate.json", "--worker", "url=http://c:3,models=m"],
      { KVGATE_PORT: "2", KVGATE_TEMPERATURE: "0.25", KVGATE_WORKERS: "url=http://b:2,models=m url=http://b:3,models=m" }, { "/etc/kvgate.json": file });
    expect(c.port).toBe(3);
    expect(c.log).toBe("warn");
    expect(c.router.temperature).toBe(0.25);
    expect(c.router.queueThreshold).toBeNull();
    expect(c.workers.map((w) => w.url)).toEqual(["http://c:3"]);
    const envOnly = await load([], { KVGATE_WORKERS: "url=http://b:2,models=m;url=http://b:3,models=m" });
    expect(envOnly.workers.map((w) => w.url)).toEqual(["http://b:2", "http://b:3"]);
  });

  it("should read inline JSON from KVGATE_CONFIG_JSON (hosts without files)", async () => {
    const c = await load([], { KVGATE_CONFIG_JSON: JSON.stringify({ adminToken: "s3cret", upstream: { retries: 0 } }) });
    expect(c.adminToken).toBe("s3cret");
    expect(c.upstream.retries).toBe(0);
  });

  it("should parse boolean flags, their --no- forms, off values and repeatable options", async () => {
    const c = await load(["--no-stream-usage", "--assume-kv-reuse=false", "--queue-threshold", "off", "--tokenizer", "A=/models/a", "--tokenizer", "B=https://hub/b/",
      "--worker", "http://w1:8000", "--worker", "url=http://w2:8000/,id=two,models=x|y,block_size=32,dp_size=2,kv_events=no"]);
    expect(c.upstream.streamUsage).toBe(false);
    expect(c.router.assumeKvReuse).toBe(false);
    expect(c.router.queueThreshold).toBeNull();
    expect(c.tokenizers).toEqual({ A: { dir: "/models/a" }, B: { dir: "https://hub/b/" } });
    expect(c.workers).toEqual([{ url: "http://w1:8000" }, { url: "http://w2:8000", id: "two", models: ["x", "y"], blockSize: 32, dpSize: 2, kvEvents: false }]);
  });

  it("should reject unknown options, bad values and unknown JSON keys", async () => {
    for (const [argv, env, msg] of [
      [["--prot", "1"], {}, "unknown option --prot"],
      [["--port", "70000"], {}, "--port must be an integer in 0..65535"],
      [["--port"], {}, "needs a value"],
      [["--log", "loud"], {}, "expected one of info, warn, off"],
      [[], { KVGATE_RETRIES: "two" }, "KVGATE_RETRIES"],
      [[], { KVGATE_CONFIG_JSON: '{"router":{"temprature":1}}' }, "unknown config key router.temprature"],
      [[], { KVGATE_CONFIG_JSON: "{" }, "not valid JSON"],
      [["--config", "/missing.json"], {}, "cannot read config file"],
      [["--worker", "id=x"], {}, "needs a url"],
      [["--worker", "url=ftp://x"], {}, "must be http(s)"],
      [["--session-header", "X-Session"], {}, "lower-case"],
    ] as [string[], Record<string, string>, string][]) {
      await expect(load(argv, env), argv.join(" ") || JSON.stringify(env)).rejects.toThrow(msg);
    }
    expect(() => parseWorker({ url: "http://x", dp_size: 0 })).toThrow("dp_size");
    expect(() => parseWorker({ url: "http://x", speed: 1 })).toThrow("unknown worker field");
  });

  it("should document every option with its flag, variable and default in kvgate serve --help", async () => {
    const help = serveHelp();
    for (const o of OPTIONS) {
      expect(help).toContain(o.kind.type === "bool" ? `--[no-]${o.flag}` : `--${o.flag} `);
      expect(help).toContain(envName(o));
      expect(help).toContain(`[${o.key};`);
    }
    expect(help).toContain("(default 8080)");
    expect(help).toContain("(default 127.0.0.1)");
    let out = "";
    expect(await runCli(["serve", "--help"], { stdin: () => "", write: (t) => (out += t) })).toBe(0);
    expect(out).toBe(help);
    expect((await loadGatewayConfig({ argv: ["--help"], env: {} })).kind).toBe("help");
  });
});
