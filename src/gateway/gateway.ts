/**
 * @module createGateway: builds one gateway instance from a GatewayConfig — KV index, router, tokenizers, fleet,
 * metrics — and its app. The host (a runtime adapter or a test) injects what differs: file reading, the upstream
 * transport, clocks and logging.
 */
import { HedgePolicy } from "./hedge-policy.ts";
import type { Hono } from "hono";
import { createKvIndex } from "../core/create-kv-index.ts";
import { fanOutDecisions, performanceNow, Router, type NowFn, type RouteSignals } from "../routing/index.ts";
import { DecisionRing } from "./decision-ring.ts";
import { DecisionLogSink, type DecisionLogFactory } from "../decisions/decision-log-sink.ts";
import { KvgateError } from "../core/errors.ts";
import type { Tracer } from "@opentelemetry/api";
import { createTracing } from "../observability/tracing.ts";
import { createTextLoader, createTokenizerRegistry } from "../tokenize/index.ts";
import { createApp } from "./app.ts";
import type { GatewayConfig } from "./config.ts";
import { Fleet } from "./fleet.ts";
import { GatewayMetrics } from "./gateway-metrics.ts";
import type { GatewayState, LogFn } from "./gateway-state.ts";
import type { KvEventTransportFactory } from "../events/kv-event-transport.ts";
import { KvIngest } from "./kv-ingest.ts";
import { PromptTokenizerPool } from "./prompt-tokens.ts";
import { EngineMetricsScraper } from "./engine-metrics.ts";
import { WorkerHealthMonitor } from "./worker-health.ts";
import type { SyncBusFactory } from "../replicas/sync-bus.ts";
import type { ReplicaSync } from "../replicas/replica-sync.ts";
import { startReplicaSync } from "./replica-setup.ts";
import { sampleTimeline } from "./stats-snapshot.ts";
import { budgetBytes, DEFAULT_PROMPT_MEMO_ENTRIES } from "../core/kv-index-options.ts";
import { chooseIndexSize, describeIndexSize, IndexSizeWatch, type SizedWorker } from "./index-sizing.ts";
import { DEFAULT_STREAM_LEASE_MS, StreamLeases } from "./stream-leases.ts";

export interface GatewayHost {
  /** Reads local tokenizer files (Node, Bun, Deno); without it only http(s) tokenizer sources load. */
  readFile?: (path: string) => Promise<string>;
  /** Transport to the workers; default the global fetch. */
  fetch?: typeof fetch;
  /** The router's clock (ms, monotonic); default performance.now. */
  now?: NowFn;
  fineNow?: NowFn;
  /** One log line (no newline); default console.error. */
  log?: (line: string) => void;
  /** ZeroMQ subscriber for workers with a zmq_endpoint (Node, Bun, Deno); without it such workers are refused. */
  kvEventTransport?: KvEventTransportFactory;
  /** The runtime's name, for error messages. */
  runtime?: string;
  /** NATS for router replicas sharing state (--nats); without it --nats is refused. */
  syncBus?: SyncBusFactory;
  /** Opens the decision log (--decision-log; Node); without it --decision-log is refused. */
  decisionLog?: DecisionLogFactory;
  /** The runtime's environment, for the standard OTEL_* tracing variables (bootGateway passes the adapter's env). */
  otelEnv?: Readonly<Record<string, string | undefined>>;
  /** An embedder's own tracer (its provider and exporter); wins over otelEnv. */
  tracer?: Tracer;
  /**
   * The runtime can end a request whose client left without telling kvgate (workerd): streamed responses then hold
   * their bookings on a lease (--stream-lease-ms, default 10 s here).
   */
  dropsGoneClients?: boolean;
  /**
   * The adapter takes every streamed answer's direct source (direct-source.ts) before anything reads its body, and
   * builds a stream from the source itself when it cannot write it: the relay's answers then carry no body stream
   * (Node, where constructing one costs 12–18 µs per request).
   */
  takesDirectSources?: boolean;
  /** The adapter starts the built-in simulated fleet (config.simWorkers) when no worker is configured: size the index for it. */
  builtInFleet?: boolean;
}

export interface Gateway {
  readonly state: GatewayState;
  readonly app: Hono;
  /** The Web-standard entry point every runtime serves. */
  fetch(req: Request, env?: unknown, ctx?: unknown): Response | Promise<Response>;
  /** Housekeeping: router expiries and health probes. Adapters with timers call it every config.tickMs. */
  tick(): Promise<void> | undefined;
  /** Closes what the gateway opened itself (ZeroMQ sockets). */
  close(): Promise<void>;
}

function requestIds(): () => string {
  const r = new Uint32Array(1);
  crypto.getRandomValues(r);
  const prefix = r[0]!.toString(16).padStart(8, "0");
  let n = 0;
  return () => `kvg-${prefix}-${(n++).toString(36)}`;
}

/**
 * The workers the index is sized for at start: the configured ones, or the built-in simulated fleet the adapter is about
 * to start. A worker's KV-event mode is known before it joins unless it hangs on models discovered later ("auto").
 */
function plannedFleet(config: GatewayConfig, builtIn: boolean): SizedWorker[] {
  if (config.workers.length === 0) {
    const n = builtIn ? config.simWorkers + (config.simWorkers > 0 ? config.simPrefillWorkers : 0) : 0;
    return Array.from({ length: n }, () => ({ totalKvBlocks: config.simGpuBlocks, kvEvents: true }));
  }
  const precise = (m: string): boolean => m in config.tokenizers;
  return config.workers.map((w) => ({
    totalKvBlocks: w.totalKvBlocks, dpSize: w.dpSize,
    kvEvents: w.kvEvents ?? (config.kvEvents === "auto" ? (w.models !== undefined && w.models.length > 0 && w.models.every(precise)) : config.kvEvents === "on"),
  }));
}

export async function createGateway(config: GatewayConfig, host: GatewayHost = {}): Promise<Gateway> {
  const fetchFn = host.fetch ?? globalThis.fetch.bind(globalThis);
  const now = host.now ?? performanceNow;
  const fineNow = host.fineNow ?? performanceNow;
  const write = host.log ?? ((line: string) => console.error(line));
  const level = config.log;
  const log: LogFn = (lvl, message) => {
    if (level === "off" || (level === "warn" && lvl === "info")) return;
    write(`kvgate ${lvl}: ${message}`);
  };
  const r = config.router;
  const size = chooseIndexSize(config.index.capacity, plannedFleet(config, host.builtInFleet === true));
  const index = await createKvIndex({
    capacity: size.capacity, maxSlots: config.index.maxSlots, maxPromptTokens: config.index.maxPromptTokens,
    matchJump: config.index.matchJump, approxTtlMs: r.approxTtlMs,
    promptMemoEntries: config.index.promptMemoMb > 0 ? DEFAULT_PROMPT_MEMO_ENTRIES : 0, promptMemoBytes: config.index.promptMemoMb << 20,
  });
  const ops = config.ops;
  const metrics = new GatewayMetrics(now);
  log("info", describeIndexSize(size, budgetBytes(index.options)));
  metrics.indexCapacity.set({ source: size.source }, size.capacity);
  const sizeWatch = new IndexSizeWatch(size, (m) => log("warn", m), () => metrics.indexOutgrown.inc());
  // The circuit breaker hears of every booking (its half-open trial is the first one); it is built after the router.
  let health: WorkerHealthMonitor | undefined;
  let sync: ReplicaSync | undefined;
  const decisions = new DecisionRing(config.decisions.recent);
  const planSignals = new Map<string, RouteSignals>();
  const d = config.decisions;
  if (d.log !== "" && !host.decisionLog) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--decision-log needs a file system; ${host.runtime ?? "this runtime"} has none here (use Node)`);
  }
  const decisionLog = d.log !== "" ? new DecisionLogSink(host.decisionLog!({ path: d.log, maxBytes: d.logMaxBytes, keep: d.logKeep }, (m) => log("warn", m)), d.logTokens) : undefined;
  const decisionSink = fanOutDecisions([decisions.capacity > 0 ? decisions : undefined, decisionLog]);
  const router = new Router({ index, now, fineNow, decisions: decisionSink, observer: {
    booked: (b) => {
      health?.booked(b.worker);
      sync?.booked(b);
    },
    prefillDone: (b) => sync?.prefillDone(b), freed: (b) => sync?.freed(b), recorded: (r) => sync?.recorded(r),
    planOpened: () => metrics.planOpened(), planClosed: (p) => {
      metrics.planClosed(p.reason);
      planSignals.delete(p.planId);
    },
    distrusted: (d) => {
      metrics.distrusted.inc({ worker: d.worker });
      log("warn", `worker ${d.worker} rank ${d.dpRank}: reported cached tokens are ${(d.ratio * 100).toFixed(0)}% of predicted; dropped its ${d.droppedEntries} index entries until its KV events confirm them again`);
    },
    blind: (b) => {
      if (b.blind) metrics.blinded.inc({ worker: b.worker });
      log("warn", b.blind
        ? `worker ${b.worker} rank ${b.dpRank}: no KV event of it arrived while it prefilled new blocks for ${b.prefills} requests over ${((b.silentMs ?? 0) / 1000).toFixed(1)} s (are its events reaching kvgate?); routing it in approximate mode until they arrive`
        : `worker ${b.worker} rank ${b.dpRank}: KV events arrive again; its index follows them`);
    },
  } }, {
    policy: r.policy, overlapWeight: r.overlapWeight, newPrefillFactor: r.newPrefillFactor, inflightCached: r.inflightCached, temperature: r.temperature,
    assumeKvReuse: r.assumeKvReuse, queueThreshold: r.queueThreshold,
    queuePolicy: r.queuePolicy, queueMaxLength: r.queueMaxLength, queueMaxWaitMs: r.queueMaxWaitMs, retryAfterMs: r.retryAfterMs,
    busy: {
      activeDecodeBlocksFrac: r.busyDecodeBlocksFrac, activePrefillTokens: r.busyPrefillTokens, activePrefillTokensFrac: r.busyPrefillTokensFrac,
      engineWaiting: ops.busyEngineWaiting, engineKvUsage: ops.busyEngineKvUsage, engineStale: ops.engineMetricsMs > 0,
    },
    sessionHeader: r.sessionHeader, affinityMode: r.affinityMode, sessionTtlMs: r.sessionTtlMs, sessionMaxEntries: r.sessionMaxEntries, sessionMaxIdBytes: r.sessionMaxIdBytes, approxTtlMs: r.approxTtlMs, closedLoop: r.closedLoop, decodeAware: r.decodeAware,
    hotPrefixSpread: r.hotPrefixSpread,
    staleBookingMs: r.staleBookingMs, planTtlMs: r.planTtlMs, maxOpenPlans: r.maxOpenPlans, seed: r.seed,
  });
  const precise = Object.keys(config.tokenizers);
  const registry = createTokenizerRegistry({
    mode: precise.length > 0 ? "precise" : "approximate", blockSizeHint: config.blockSize, models: config.tokenizers,
    readText: createTextLoader({ readFile: host.readFile, fetch: fetchFn }), maxLoaded: config.tokenizerMaxLoaded, unknownModel: "approximate",
  });
  // One warning per model and minute: a tokenizer that cannot load would otherwise log on every request.
  const warned = new Map<string, number>();
  const tokenizers = new PromptTokenizerPool(registry, fineNow, config.blockSize, (model, e) => {
    metrics.tokenized.inc({ mode: "fallback" });
    if (now() - (warned.get(model) ?? -Infinity) < 60_000) return;
    warned.set(model, now());
    log("warn", `model ${model}: routing in approximate mode (${(e as Error).message})`);
  });
  const fleet = new Fleet(router, {
    blockSize: config.blockSize, kvEvents: config.kvEvents, precise: (m) => precise.includes(m), fetch: fetchFn, maxAdapters: config.maxAdapters,
    added: (w) => sizeWatch.added(w.id, fleet.list()),
  });
  health = new WorkerHealthMonitor(fleet, fetchFn, {
    intervalMs: ops.healthCheckMs, probeMs: config.upstream.healthProbeMs, timeoutMs: ops.healthTimeoutMs,
    failThreshold: ops.healthFailThreshold, successThreshold: ops.healthSuccessThreshold,
    circuit: { failures: ops.circuitFailures, openMs: ops.circuitOpenMs },
  }, now, (m) => log("warn", m), metrics.registry);
  const engineMetrics = new EngineMetricsScraper(fleet, router, fetchFn, {
    intervalMs: ops.engineMetricsMs, staleAfter: ops.engineMetricsStaleAfter, timeoutMs: Math.max(100, Math.min(ops.engineMetricsMs, 5_000)),
  }, now, (m) => log("warn", m), metrics.registry);
  const state: GatewayState = {
    config, index, router, fleet, registry, tokenizers, metrics, health, engineMetrics, ingest: new KvIngest(index, fleet, metrics, (m) => log("warn", m), {
      onCold: (w, cold) => router.setCacheCold(w, cold), onEvents: (w, rank) => router.kvEventsArrived(w, rank), transport: host.kvEventTransport, runtime: host.runtime,
    }),
    decisions, tracing: createTracing({ env: host.otelEnv, tracer: host.tracer, fetch: fetchFn, warn: (m) => log("warn", m) }),
    hedge: new HedgePolicy({ budget: config.upstream.hedgeBudget, quantile: config.upstream.hedgeQuantile, minSamples: config.upstream.hedgeMinSamples,
      window: Math.max(256, config.upstream.hedgeMinSamples) }),
    planSignals,
    leases: new StreamLeases(config.upstream.streamLeaseMs ?? (host.dropsGoneClients ? DEFAULT_STREAM_LEASE_MS : 0), config.upstream.idleTimeoutMs),
    fetch: fetchFn, now, fineNow, log, newRequestId: requestIds(), takesDirectSources: host.takesDirectSources === true,
  };
  for (const failure of Object.entries(await registry.preload())) log("warn", `tokenizer of ${failure[0]} did not load: ${failure[1].message}`);
  for (const w of config.workers) {
    const added = await fleet.add(w);
    await state.ingest.attach(added);
    log("info", `worker ${added.id}: ${added.url} serving ${added.models.join(", ")}${added.kvEvents ? " (KV events)" : ""}`);
  }

  sync = startReplicaSync(config, host, state);
  let lastTick = now();
  const tick = (): Promise<void> | undefined => {
    lastTick = now();
    const report = router.tick();
    if (report.approxBlocksRefreshed > 0) metrics.approxRefreshed.inc(undefined, report.approxBlocksRefreshed);
    // Folds the core's u32 counters into the index's totals often enough that none wraps unseen between scrapes.
    index.counters();
    sync?.tick();
    sampleTimeline(state);
    const expired = state.leases.sweep(fineNow());
    if (expired > 0) {
      metrics.leasesExpired.inc(undefined, expired);
      log("warn", `${expired} streamed response(s) unread for ${state.leases.leaseMs} ms: their bookings were given back (the client is likely gone)`);
    }
    const work = [health!.probe(), engineMetrics.scrape()].filter((p) => p !== undefined);
    return work.length === 0 ? undefined : Promise.all(work).then(() => undefined);
  };
  const app = createApp(state, { maybeTick: () => (now() - lastTick >= config.tickMs ? tick() : undefined) });
  return { state, app, fetch: (req, env, ctx) => app.fetch(req, env as never, ctx as never), tick, close: async () => {
    await sync?.close();
    await decisionLog?.close();
    await state.tracing.flush();
    await state.ingest.close();
  } };
}
