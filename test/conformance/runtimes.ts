/**
 * @module Starts kvgate as a real process under one runtime, configured only through KVGATE_* variables (the one
 * config channel all four share), and returns its URL. Node, Bun and Deno run the adapters in src/adapter/;
 * workerd runs the Worker bundle wrangler builds, under workerd directly (wrangler dev would rebuild and restart
 * the isolate whenever a source file changes, dropping the index mid-test).
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, start, until, waitForOutput, type Proc } from "./processes.ts";

/** workerd-pool: workerd with the PoolState Durable Object bound (the Workers deployment with shared state). */
export type RuntimeName = "node" | "bun" | "deno" | "workerd" | "workerd-pool";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const BIN = join(ROOT, "node_modules/.bin");

export interface RunningGateway {
  url: string;
  proc: Proc;
  stop(): Promise<void>;
}

const LISTENING = /kvgate listening on (http:\/\/[^\s]+)/;

async function listening(proc: Proc): Promise<RunningGateway> {
  const url = (await waitForOutput(proc, LISTENING))[1]!;
  return { url, proc, stop: () => proc.stop() };
}

/** A capnp string literal. */
const q = (s: string): string => JSON.stringify(s);

export interface WorkerdOptions {
  /** Bind KVGATE_POOL to the PoolState Durable Object (in-memory storage), as wrangler.toml declares it. */
  pool?: boolean;
  /** Worker services, each its own isolate on its own socket, all running the same bundle (default 1). */
  edges?: number;
}

/** Starts workerd; `urls` has one entry per edge (`url` is the first). */
export async function startWorkerd(env: Record<string, string>, opts: WorkerdOptions = {}): Promise<RunningGateway & { urls: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), "kvgate-workerd-"));
  const build = start(join(BIN, "wrangler"), ["deploy", "--dry-run", "--outdir", dir], { cwd: ROOT, env: { WRANGLER_SEND_METRICS: "false" } });
  await new Promise<void>((resolve, reject) => build.child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`wrangler build failed:\n${build.output()}`)))));
  const wasm = readdirSync(dir).filter((f) => f.endsWith(".wasm"));
  const edges = opts.edges ?? 1;
  const ports = await Promise.all(Array.from({ length: edges }, () => freePort()));
  // wrangler names the bundle after wrangler.toml's main (src/adapter/workerd/worker.ts → worker.js).
  const modules = [`(name = "worker.js", esModule = embed "worker.js")`, ...wasm.map((f) => `(name = ${q(f)}, wasm = embed ${q(f)})`)];
  const bindings = Object.entries(env).map(([k, v]) => `(name = ${q(k)}, text = ${q(v)})`);
  // The first edge defines the namespace; the others bind to it by service name (one object for all isolates).
  const worker = (i: number): string => {
    const pool = !opts.pool ? [] : [`(name = "KVGATE_POOL", durableObjectNamespace = (className = "PoolState"${i === 0 ? "" : `, serviceName = "edge0"`}))`];
    const objects = opts.pool && i === 0
      ? `durableObjectNamespaces = [(className = "PoolState", uniqueKey = "kvgate-pool", enableSql = true)],\n  durableObjectStorage = (localDisk = "pool-disk"),\n  `
      : "";
    return `const edge${i} :Workerd.Worker = (
  modules = [${modules.join(", ")}],
  compatibilityDate = "2026-04-01",
  compatibilityFlags = ["enable_request_signal"],
  bindings = [${[...bindings, ...pool].join(", ")}],
  ${objects}globalOutbound = "internet",
);`;
  };
  const ids = Array.from({ length: edges }, (_, i) => i);
  writeFileSync(join(dir, "kvgate.capnp"), `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    ${ids.map((i) => `(name = "edge${i}", worker = .edge${i}),`).join("\n    ")}
    ${opts.pool ? `(name = "pool-disk", disk = (path = ${q(join(dir, "pool"))}, writable = true)),` : ""}
    # Loopback must be allowed explicitly: the default outbound network only reaches public addresses.
    (name = "internet", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [${ids.map((i) => `(name = "http${i}", address = "127.0.0.1:${ports[i]}", http = (), service = "edge${i}")`).join(", ")}],
);
${ids.map(worker).join("\n")}
`);
  if (opts.pool) mkdirSync(join(dir, "pool"));
  const proc = start(join(BIN, "workerd"), ["serve", join(dir, "kvgate.capnp"), "--experimental"], { cwd: dir });
  const urls = ports.map((p) => `http://127.0.0.1:${p}`);
  for (const url of urls) await until(async () => (await fetch(`${url}/health`)).ok, `workerd on ${url}:\n${proc.output()}`, 60_000);
  return {
    url: urls[0]!, urls, proc,
    stop: async () => {
      await proc.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts the gateway under `runtime` with `env` (KVGATE_* variables) as its whole configuration. */
export async function startGateway(runtime: RuntimeName, env: Record<string, string>): Promise<RunningGateway> {
  // KVGATE_SIM_WORKERS=0: the suite brings its own workers, so no built-in simulated fleet on Node.
  const all = { KVGATE_HOST: "127.0.0.1", KVGATE_PORT: "0", KVGATE_SIM_WORKERS: "0", ...env };
  switch (runtime) {
    case "node":
      return listening(start(process.execPath, ["--import", "tsx", "src/adapter/node/serve.ts"], { cwd: ROOT, env: all }));
    case "bun":
      return listening(start(join(BIN, "bun"), ["src/adapter/bun/serve.ts"], { cwd: ROOT, env: all }));
    case "deno":
      return listening(start(join(BIN, "deno"), ["run", "--no-prompt", "--allow-net", "--allow-read", "--allow-env", "src/adapter/deno/serve.ts"], { cwd: ROOT, env: all }));
    case "workerd":
      return startWorkerd(env);
    case "workerd-pool":
      return startWorkerd(env, { pool: true });
  }
}
