/**
 * @module `kvgate bridge` as a command: flags, help, a stats line now and then, and a clean stop (what is queued is
 * forwarded first), over a host the runtime adapter supplies (src/adapter/node/bridge-host.ts). Forwarding is bridge.ts.
 */
import { parseFlags } from "../cli/flags.ts";
import { KvgateError } from "../core/errors.ts";
import { KvBridge, type BridgeStats } from "./bridge.ts";
import type { ZmqSockets } from "../zmq/zmq-sockets.ts";

export const BRIDGE_HELP = `usage: kvgate bridge --zmq tcp://HOST:PORT --to URL --token T [options]
  Subscribes to an engine's KV-event socket (vLLM/SGLang --kv-events-config endpoint) and forwards every
  message unchanged (sequence number, topic, msgpack payload) to a kvgate router's /admin/kv-events,
  batched, authenticated and retried. For routers that cannot open ZeroMQ sockets (Cloudflare Workers) or reach
  the engine. The router applies the engine's sequence numbers itself: a gap it cannot fill marks the
  worker cold (scored as caching nothing until rebuilt). With --replay the bridge fills gaps first from
  the engine's replay socket, and on start resumes where the router's view ends.

  --zmq ENDPOINT          engine KV-event PUB endpoint for dp rank 0 (required; env KVGATE_BRIDGE_ZMQ)
  --replay ENDPOINT       engine replay ROUTER endpoint for dp rank 0 (vLLM replay_endpoint)
  --to URL                router URL: http://host:port or its /admin/kv-events (required; env KVGATE_BRIDGE_TO)
  --token T               the router's admin token (env KVGATE_ADMIN_TOKEN)
  --worker ID             worker id in the router (default: the engine host with port 8000, the id
                          kvgate gives --worker url=http://HOST:8000)
  --dp-rank N             data-parallel rank: connects to port + N, as vLLM publishes (default 0)
  --dp-size N             forward N ranks from --dp-rank on (ports + rank each, one sender per rank) (default 1)
  --topic PREFIX          subscribe to this topic prefix only (default: every message)
  --bind                  bind the endpoint instead of connecting (engine configured to connect)
  --hwm N                 messages ZeroMQ holds while the router is slow (default 10000)
  --batch-frames N        messages per POST at most (default 256)
  --batch-bytes N         bytes per POST at most (default 1048576)
  --flush-ms N            longest a message waits for a batch (default 20)
  --queue-frames N        messages queued at most before the socket is no longer read (default 10000)
  --queue-bytes N         bytes queued at most (default 67108864)
  --retry-max-ms N        longest backoff between POST retries (default 5000)
  --stats-ms N            print a stats line this often when something changed; 0 = never (default 10000)
`;

const SPEC = {
  zmq: "value", replay: "value", to: "value", token: "value", worker: "value", "dp-rank": "value", "dp-size": "value", topic: "value", bind: "bool",
  hwm: "value", "batch-frames": "value", "batch-bytes": "value", "flush-ms": "value", "queue-frames": "value", "queue-bytes": "value",
  "retry-max-ms": "value", "stats-ms": "value", help: "bool",
} as const;

function intFlag(flags: Record<string, string | boolean>, name: string, min: number): number | undefined {
  const v = flags[name];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (typeof v !== "string" || !Number.isInteger(n) || n < min) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--${name} must be an integer >= ${min}, got ${String(v)}`);
  return n;
}

function ingestUrl(to: string): string {
  let u: URL;
  try {
    u = new URL(to);
  } catch {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--to ${to} is not a URL`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--to must be http(s), got ${to}`);
  return u.pathname === "/" || u.pathname === "" ? `${u.origin}/admin/kv-events` : u.toString();
}

function statsLine(s: BridgeStats, label = ""): string {
  return `kvgate bridge: ${label}received ${s.received}, sent ${s.sentFrames} in ${s.posts} POSTs, queued ${s.queuedFrames}, gaps ${s.gaps}, ` +
    `replayed ${s.replayed}, lost ${s.lost}, restarts ${s.restarts}, failures ${s.failures}, rejected ${s.rejectedFrames}, ` +
    `malformed ${s.malformed}, backpressure waits ${s.backpressureWaits}, router last seq ${s.routerLastSeq}\n`;
}

function wantsHelp(args: readonly string[]): boolean {
  const { flags, positional } = parseFlags(args, SPEC);
  return flags.help === true || positional.includes("help");
}

/** Builds one bridge per data-parallel rank from argv and the environment; "help" when asked for. */
export function bridgeFromArgs(args: readonly string[], env: Readonly<Record<string, string | undefined>>, log: (line: string) => void,
  sockets: ZmqSockets): KvBridge[] | "help" {
  if (wantsHelp(args)) return "help";
  const { flags, positional } = parseFlags(args, SPEC);
  if (positional.length > 0) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `unexpected argument ${JSON.stringify(positional[0])}`);
  const zmq = (flags.zmq as string | undefined) ?? env.KVGATE_BRIDGE_ZMQ;
  const to = (flags.to as string | undefined) ?? env.KVGATE_BRIDGE_TO;
  const token = (flags.token as string | undefined) ?? env.KVGATE_ADMIN_TOKEN;
  if (!zmq) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "--zmq is required (kvgate bridge --help)");
  if (!to) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "--to is required (kvgate bridge --help)");
  if (!token) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "--token (or KVGATE_ADMIN_TOKEN) is required: the router's ingest is behind its admin token");
  const host = /^tcp:\/\/(.+):\d+$/.exec(zmq)?.[1];
  const worker = (flags.worker as string | undefined) ?? (host && host !== "*" ? `${host}:8000` : undefined);
  if (!worker) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "--worker is required when the endpoint has no host");
  const first = intFlag(flags, "dp-rank", 0) ?? 0;
  const size = intFlag(flags, "dp-size", 1) ?? 1;
  if (size > 1 && flags.bind === true) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "--bind serves one rank: start one bridge per rank");
  return Array.from({ length: size }, (_, i) => new KvBridge({
    zmq, replay: flags.replay as string | undefined, topic: flags.topic as string | undefined, bind: flags.bind === true,
    receiveHighWaterMark: intFlag(flags, "hwm", 1), log: size > 1 ? (line) => log(`rank ${first + i}: ${line}`) : log, sockets,
    sender: {
      url: ingestUrl(to), token, worker, dpRank: first + i, maxBatchFrames: intFlag(flags, "batch-frames", 1),
      maxBatchBytes: intFlag(flags, "batch-bytes", 1024), flushMs: intFlag(flags, "flush-ms", 0), maxQueueFrames: intFlag(flags, "queue-frames", 1),
      maxQueueBytes: intFlag(flags, "queue-bytes", 1024), retryMaxMs: intFlag(flags, "retry-max-ms", 1),
    },
  }));
}

/** What the command needs of its process: the environment, output, the ZeroMQ sockets and a stop signal. */
export interface BridgeHost {
  env: Readonly<Record<string, string | undefined>>;
  out(text: string): void;
  err(text: string): void;
  sockets(): Promise<ZmqSockets>;
  /** Resolves when the process is told to stop (SIGINT, SIGTERM). */
  stopped: Promise<void>;
}

/** Runs the bridges until the host says stop; returns the exit code. */
export async function runBridgeCommand(args: readonly string[], host: BridgeHost): Promise<number> {
  const log = (line: string): void => host.err(`kvgate bridge: ${line}\n`);
  // Help needs no sockets (loading the native module is the slow part of starting).
  const bridges = wantsHelp(args) ? "help" : bridgeFromArgs(args, host.env, log, await host.sockets());
  if (bridges === "help") {
    host.out(BRIDGE_HELP);
    return 0;
  }
  const statsMs = intFlag(parseFlags(args, SPEC).flags, "stats-ms", 0) ?? 10_000;
  await Promise.race([Promise.all(bridges.map((b) => b.start())), host.stopped]);
  const label = (b: KvBridge): string => (bridges.length > 1 ? `rank ${b.options.sender.dpRank}: ` : "");
  for (const b of bridges) {
    const o = b.options;
    host.out(`kvgate bridge: ${label(b)}${b.endpoint}${b.replayEndpoint ? ` (replay ${b.replayEndpoint})` : ""} -> ${o.sender.url} as worker ${o.sender.worker}, resuming after router seq ${b.stats.routerLastSeq}\n`);
  }
  const shown = new Map<KvBridge, string>();
  const timer = statsMs > 0 ? setInterval(() => {
    for (const b of bridges) {
      const line = statsLine(b.stats, label(b));
      if (line === shown.get(b)) continue;
      host.out(line);
      shown.set(b, line);
    }
  }, statsMs) : undefined;
  await host.stopped;
  if (timer) clearInterval(timer);
  await Promise.all(bridges.map((b) => b.stop()));
  for (const b of bridges) host.out(statsLine(b.stats, label(b)));
  return 0;
}
