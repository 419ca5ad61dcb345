/**
 * @module The gateway's typed configuration, its defaults (from the option table) and the parsers for the two
 * structured values — worker specs and tokenizer sources — shared by the config loader and the admin API.
 */
import { KvgateError } from "../core/errors.ts";
import type { RoutingPolicy, WorkerRole } from "../routing/index.ts";
import type { ModelTokenizerSource } from "../tokenize/index.ts";
import { OPTIONS } from "./config-options.ts";

/** One worker as configured (or added through the admin API); ids and models may be filled in later. */
export interface WorkerConfig {
  url: string;
  /** Default: host:port of the url. */
  id?: string;
  /** Empty or absent: asked from the worker's /v1/models when it is added. */
  models?: string[];
  /** LoRA adapters served beside the models (vLLM: each under its own model name), adapters of the first model. */
  adapters?: string[];
  /** The worker loads any known adapter of its models on demand (vLLM with runtime LoRA updating). */
  loadsAdapters?: boolean;
  blockSize?: number;
  dpStart?: number;
  dpSize?: number;
  role?: WorkerRole;
  /** Absent: decided by the gateway's kvEvents setting. */
  kvEvents?: boolean;
  /** The engine runs EAGLE speculative decoding (its block hashes cover one token of the next block). */
  eagle?: boolean;
  totalKvBlocks?: number;
  maxBatchedTokens?: number;
  /** The engine's KV-event PUB socket for dp rank 0 (vLLM `endpoint`, e.g. tcp://10.0.0.5:5557): kvgate subscribes itself. */
  zmqEndpoint?: string;
  /** The engine's replay ROUTER socket for dp rank 0 (vLLM `replay_endpoint`). */
  replayEndpoint?: string;
  /** Topic prefix to subscribe to (vLLM `topic`); default every message. */
  kvTopic?: string;
  /** SGLang prefill workers: the port of their bootstrap server (default 8998, SGLang's). */
  bootstrapPort?: number;
}

/** Disaggregated prefill/decode (src/gateway/disagg-*.ts); used for models served by decode-role workers. */
export interface DisaggOptions {
  flow: "vllm" | "sglang";
  /** vLLM flow: prefill on the decode worker when fewer prompt tokens than this are uncached there (0 = never). */
  localPrefillBelow: number;
  /** vLLM flow: prefill on the decode worker when the prefill pool is busy above this fraction of batch capacity. */
  prefillBusyFrac: number;
}

export interface RouterOptions {
  policy: RoutingPolicy;
  overlapWeight: number;
  newPrefillFactor: number;
  inflightCached: boolean;
  temperature: number;
  assumeKvReuse: boolean;
  queueThreshold: number | null;
  queuePolicy: "fcfs" | "lcfs" | "wspt";
  queueMaxLength: number;
  queueMaxWaitMs: number;
  retryAfterMs: number;
  busyDecodeBlocksFrac?: number;
  busyPrefillTokens?: number;
  busyPrefillTokensFrac?: number;
  sessionHeader: string;
  /** Request header naming the tenant, whose cache namespace it becomes (vLLM cache_salt); empty: none. */
  tenantHeader: string;
  affinityMode: "hard" | "soft";
  sessionTtlMs: number;
  sessionMaxEntries: number;
  sessionMaxIdBytes: number;
  approxTtlMs: number;
  closedLoop: boolean;
  decodeAware: boolean;
  hotPrefixSpread: boolean;
  staleBookingMs: number;
  planTtlMs: number;
  maxOpenPlans: number;
  seed: number;
}

export interface GatewayConfig {
  host: string;
  port: number;
  adminToken: string;
  /** Bearer token for two-phase commit and plan reports; empty: none. */
  routeToken: string;
  maxBodyBytes: number;
  tickMs: number;
  log: "info" | "warn" | "off";
  workers: WorkerConfig[];
  /** Built-in simulated fleet started by the Node adapter when no worker is configured. */
  simWorkers: number;
  simGpuBlocks: number;
  /** With the built-in fleet: this many prefill engines, and the simWorkers engines become decode workers. */
  simPrefillWorkers: number;
  disagg: DisaggOptions;
  blockSize: number;
  kvEvents: "auto" | "on" | "off";
  /** LoRA adapters the fleet may know at once (configured and discovered). */
  maxAdapters: number;
  /** With the built-in fleet: LoRA adapters every simulated engine serves. */
  simLoraAdapters: string[];
  tokenizers: Record<string, ModelTokenizerSource>;
  tokenizerMaxLoaded: number;
  router: RouterOptions;
  /** Router replicas sharing state over NATS (src/replicas/). */
  sync: {
    nats: string;
    replicaId: string;
    stateSharing: "auto" | "on" | "off";
    stream: string;
    streamMaxAgeMs: number;
    streamMaxMsgs: number;
    heartbeatMs: number;
    snapshotIntervalMs: number;
  };
  /** capacity unset: sized from the fleet at start (index-sizing.ts). */
  index: { capacity?: number; maxSlots: number; maxPromptTokens: number; matchJump: number; promptMemoMb: number };
  upstream: {
    headersTimeoutMs: number;
    idleTimeoutMs: number;
    /** Unset: the host's default (GatewayHost.dropsGoneClients). */
    streamLeaseMs?: number;
    retries: number;
    hedgeBudget: number;
    hedgeQuantile: number;
    hedgeMinSamples: number;
    migrationLimit: number;
    streamUsage: boolean;
    healthProbeMs: number;
  };
  /** Decisions kept for /v1/stats, and the decision log (docs/observability.md). */
  decisions: { recent: number; log: string; logMaxBytes: number; logKeep: number; logTokens: boolean };
  ops: {
    healthCheckMs: number;
    healthTimeoutMs: number;
    healthFailThreshold: number;
    healthSuccessThreshold: number;
    circuitFailures: number;
    circuitOpenMs: number;
    engineMetricsMs: number;
    engineMetricsStaleAfter: number;
    busyEngineWaiting?: number;
    busyEngineKvUsage?: number;
  };
}

export function bad(message: string): never {
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message);
}

/** Sets `path` (dotted) in a nested object, creating the intermediate objects. */
export function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split(".");
  let o = target;
  for (const p of parts.slice(0, -1)) o = (o[p] ??= {}) as Record<string, unknown>;
  o[parts[parts.length - 1]!] = value;
}

/** Every option at its default. */
export function defaultConfig(): GatewayConfig {
  const out: Record<string, unknown> = {};
  for (const o of OPTIONS) {
    const v = o.default;
    setPath(out, o.key, Array.isArray(v) ? [...v] : typeof v === "object" && v !== null ? { ...v } : v);
  }
  return out as unknown as GatewayConfig;
}

const WORKER_KEYS: Record<string, keyof WorkerConfig> = {
  url: "url", id: "id", models: "models", model: "models", block_size: "blockSize", dp_start: "dpStart", dp_size: "dpSize",
  role: "role", kv_events: "kvEvents", total_kv_blocks: "totalKvBlocks", max_batched_tokens: "maxBatchedTokens",
  zmq_endpoint: "zmqEndpoint", replay_endpoint: "replayEndpoint", kv_topic: "kvTopic",
  bootstrap_port: "bootstrapPort", adapters: "adapters", lora: "adapters", lora_on_demand: "loadsAdapters", eagle: "eagle",
};

function snake(k: string): string {
  return k.replace(/-/g, "_").replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function boolOf(v: unknown, name: string): boolean {
  if (typeof v === "boolean") return v;
  if (typeof v === "string" && /^(true|1|yes|on)$/i.test(v)) return true;
  if (typeof v === "string" && /^(false|0|no|off)$/i.test(v)) return false;
  return bad(`${name} must be true or false, got ${JSON.stringify(v)}`);
}

function intOf(v: unknown, name: string, min: number): number {
  const n = typeof v === "string" && v.trim() !== "" ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < min) bad(`${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return n;
}

/** A worker from its JSON form (snake_case or camelCase keys) or its flag form `url=…,id=…,models=a|b` / a bare URL. */
export function parseWorker(raw: unknown): WorkerConfig {
  let fields: Record<string, unknown>;
  if (typeof raw === "string") {
    const s = raw.trim();
    fields = {};
    if (/^https?:\/\//i.test(s) && !s.includes(",")) fields.url = s;
    else for (const part of s.split(",")) {
      const eq = part.indexOf("=");
      if (eq < 0) bad(`worker spec part ${JSON.stringify(part)} is not key=value`);
      fields[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
    }
  } else if (raw !== null && typeof raw === "object" && !Array.isArray(raw)) {
    fields = raw as Record<string, unknown>;
  } else {
    return bad("a worker must be an object or a spec string");
  }
  const w: Partial<WorkerConfig> = {};
  let zmq: boolean | undefined;
  for (const [k0, v] of Object.entries(fields)) {
    const k = WORKER_KEYS[snake(k0)];
    if (!k) bad(`unknown worker field ${JSON.stringify(k0)}`);
    if (v === undefined || v === null) continue;
    switch (k) {
      case "url":
      case "id":
      case "role":
      case "zmqEndpoint":
      case "replayEndpoint":
      case "kvTopic":
        if (typeof v !== "string" || v.length === 0) bad(`worker ${k} must be a non-empty string`);
        (w as Record<string, unknown>)[k] = v;
        break;
      case "models":
      case "adapters":
        w[k] = typeof v === "string" ? v.split("|").map((m) => m.trim()).filter(Boolean) : Array.isArray(v) && v.every((m) => typeof m === "string" && m) ? [...v] : bad(`worker ${snake(k)} must be a list of names`);
        break;
      case "loadsAdapters":
        w.loadsAdapters = boolOf(v, "lora_on_demand");
        break;
      case "eagle":
        w.eagle = boolOf(v, "eagle");
        break;
      case "kvEvents":
        // "zmq": kvgate subscribes to the engine (needs zmq_endpoint); "http": the engine or a bridge pushes.
        if (v === "zmq" || v === "http") zmq = v === "zmq";
        w.kvEvents = v === "zmq" || v === "http" ? true : boolOf(v, "kv_events");
        break;
      default:
        w[k] = intOf(v, snake(k), k === "dpStart" ? 0 : 1);
    }
  }
  if (!w.url) bad("a worker needs a url");
  if (w.adapters?.length && w.models?.length && w.adapters.some((a) => w.models!.includes(a))) bad("a worker's adapters and models must differ");
  let url: URL;
  try {
    url = new URL(w.url);
  } catch {
    return bad(`worker url ${JSON.stringify(w.url)} is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") bad(`worker url ${w.url} must be http(s)`);
  w.url = w.url.replace(/\/+$/, "");
  if (w.role !== undefined && !["aggregated", "prefill", "decode"].includes(w.role)) bad(`unknown worker role ${w.role}`);
  checkZmq(w, zmq);
  if (w.bootstrapPort !== undefined && w.bootstrapPort > 65535) bad(`worker bootstrap_port must be a port number, got ${w.bootstrapPort}`);
  return w as WorkerConfig;
}

/** kv_events=zmq needs zmq_endpoint; a zmq_endpoint means KV events (kv_events=false or http contradicts it). */
function checkZmq(w: Partial<WorkerConfig>, zmq: boolean | undefined): void {
  for (const [name, ep] of [["zmq_endpoint", w.zmqEndpoint], ["replay_endpoint", w.replayEndpoint]] as const) {
    if (ep !== undefined && !/^(tcp:\/\/.+:\d+|ipc:\/\/.+|inproc:\/\/.+)$/.test(ep)) bad(`worker ${name} must be tcp://host:port, ipc://… or inproc://…, got ${ep}`);
  }
  if (zmq === true && !w.zmqEndpoint) bad("kv_events=zmq needs zmq_endpoint");
  if (w.zmqEndpoint && (w.kvEvents === false || zmq === false)) bad("a worker with zmq_endpoint has KV events; drop kv_events=false/http");
  if ((w.replayEndpoint || w.kvTopic !== undefined) && !w.zmqEndpoint) bad("replay_endpoint and kv_topic need zmq_endpoint");
  if (w.zmqEndpoint) w.kvEvents = true;
}

/** `MODEL=SOURCE` (flag form) or a map entry (JSON form: a directory/URL string or a ModelTokenizerSource). */
export function parseTokenizerSource(model: string, raw: unknown): ModelTokenizerSource {
  if (!model) bad("a tokenizer needs a model name");
  if (typeof raw === "string" && raw.length > 0) return { dir: raw };
  if (raw !== null && typeof raw === "object" && !Array.isArray(raw)) {
    const src = raw as ModelTokenizerSource;
    if (!src.dir && !(src.tokenizerJson && src.tokenizerConfig)) bad(`tokenizer of ${model}: give dir, or tokenizerJson and tokenizerConfig`);
    return { ...src };
  }
  return bad(`tokenizer of ${model} must be a directory, a URL prefix or an object`);
}

export function parseTokenizerFlag(s: string): [string, ModelTokenizerSource] {
  const eq = s.indexOf("=");
  if (eq <= 0) bad(`--tokenizer wants MODEL=SOURCE, got ${JSON.stringify(s)}`);
  const model = s.slice(0, eq).trim();
  return [model, parseTokenizerSource(model, s.slice(eq + 1).trim())];
}

/** The worker id a URL gets when none is given: its host and port. */
export function defaultWorkerId(url: string): string {
  return new URL(url).host;
}
