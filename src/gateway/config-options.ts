/**
 * @module Every gateway option in one table — its JSON path, CLI flag, `KVGATE_*` variable, type, default and
 * meaning — so the parser, the defaults and `kvgate serve --help` can never disagree.
 */
import { DEFAULT_MATCH_JUMP } from "../core/kv-index-options.ts";

export type OptionKind =
  | { type: "int"; min: number; max: number }
  | { type: "number"; min: number; max: number }
  | { type: "string" }
  | { type: "bool" }
  | { type: "enum"; values: readonly string[] }
  /** An integer, or "off" for null. */
  | { type: "int-or-off"; min: number; max: number }
  /** Repeatable flag; the variable holds several entries separated by ";" (or whitespace for workers). */
  | { type: "workers" }
  /** Comma-separated names (an array in the JSON file). */
  | { type: "list" }
  | { type: "tokenizers" };

export interface OptionSpec {
  /** Dotted path in the JSON config file and in GatewayConfig. */
  key: string;
  /** CLI flag without the leading dashes; the env var is KVGATE_ + flag in upper snake case. */
  flag: string;
  kind: OptionKind;
  /** The variable, when not KVGATE_ + the flag (repeatable flags have a plural variable). */
  env?: string;
  default: unknown;
  doc: string;
  group: "server" | "fleet" | "tokenizer" | "router" | "index" | "upstream" | "ops";
}

const int = (min: number, max = Number.MAX_SAFE_INTEGER): OptionKind => ({ type: "int", min, max });
const num = (min: number, max = Number.MAX_VALUE): OptionKind => ({ type: "number", min, max });
const str: OptionKind = { type: "string" };
const bool: OptionKind = { type: "bool" };
const oneOf = (...values: string[]): OptionKind => ({ type: "enum", values });

export const OPTIONS: readonly OptionSpec[] = [
  // server
  { group: "server", key: "host", flag: "host", kind: str, default: "127.0.0.1", doc: "listen address (Node, Bun, Deno; Workers ignore it)" },
  { group: "server", key: "port", flag: "port", kind: int(0, 65535), default: 8080, doc: "listen port; 0 picks a free one" },
  { group: "server", key: "adminToken", flag: "admin-token", kind: str, default: "", doc: "bearer token for /admin/* (workers, KV-event ingest); empty disables the admin API" },
  { group: "server", key: "routeToken", flag: "route-token", kind: str, default: "", doc: "bearer token for two-phase routing (POST /v1/route with commit, POST /v1/route/{plan_id}/first_token|complete|cancel); empty = no token, like /v1/route itself" },
  { group: "server", key: "maxBodyBytes", flag: "max-body-bytes", kind: int(1024), default: 16 << 20, doc: "largest request body accepted; larger ones get 413" },
  { group: "server", key: "tickMs", flag: "tick-ms", kind: int(10, 60_000), default: 250, doc: "housekeeping period: stale bookings, queue waits, TTLs, health probes" },
  { group: "server", key: "log", flag: "log", kind: oneOf("info", "warn", "off"), default: "info", doc: "log level (to stderr)" },
  // router replicas sharing state over NATS (src/replicas/)
  { group: "server", key: "sync.nats", flag: "nats", kind: str, default: "", doc: "NATS server(s) (nats://host:4222, comma-separated) through which router replicas share KV events, bookings and approximate-mode decisions (Node); empty = no sharing" },
  { group: "server", key: "sync.replicaId", flag: "replica-id", kind: str, default: "", doc: "this replica's name among its peers (letters, digits, - and _); empty = a random one" },
  { group: "server", key: "sync.stateSharing", flag: "state-sharing", kind: oneOf("auto", "on", "off"), default: "auto", doc: "share state with the other replicas: auto = on when --nats is set; off = connect to nothing" },
  { group: "server", key: "sync.stream", flag: "nats-stream", kind: str, default: "KVGATE_EVENTS", doc: "JetStream stream holding the shared KV events (created when missing); a replica that starts late reads it from its start" },
  { group: "server", key: "sync.streamMaxAgeMs", flag: "nats-stream-max-age-ms", kind: int(1000), default: 900_000, doc: "KV events older than this leave the stream" },
  { group: "server", key: "sync.streamMaxMsgs", flag: "nats-stream-max-msgs", kind: int(100), default: 200_000, doc: "KV-event batches the stream keeps (oldest dropped first)" },
  { group: "server", key: "sync.snapshotIntervalMs", flag: "snapshot-interval-ms", kind: int(0), default: 30_000, doc: "write this replica's index, sessions and stream position to the NATS object store this often, for warm restarts (0 = never; loading at start still happens)" },
  { group: "server", key: "sync.heartbeatMs", flag: "replica-heartbeat-ms", kind: int(50, 600_000), default: 2_000, doc: "a replica announces itself and its live bookings this often; peers drop its bookings after 3 missed heartbeats" },
  // fleet
  { group: "fleet", key: "workers", flag: "worker", kind: { type: "workers" }, env: "KVGATE_WORKERS", default: [], doc: "a worker: url=http://h:p[,id=ID][,models=a|b][,block_size=N][,dp_size=N][,dp_start=N][,kv_events=true|false|http|zmq][,zmq_endpoint=tcp://h:5557][,replay_endpoint=tcp://h:5558][,kv_topic=PREFIX][,total_kv_blocks=N][,max_batched_tokens=N][,role=aggregated|prefill|decode][,bootstrap_port=N][,adapters=a|b][,lora_on_demand=true][,eagle=true]; repeatable. adapters: LoRA adapters it serves (of its first model; discovered from /v1/models entries with a parent when models= is not given); lora_on_demand: it loads any adapter the fleet knows of its models. eagle: the engine runs EAGLE speculative decoding (its KV events carry token bigrams and each block hash covers one token of the next block), so prompts for it are hashed the same way; every worker of a model must agree. zmq_endpoint: kvgate subscribes to the engine's KV events itself (Node, Bun, Deno; Workers take them over HTTP from kvgate bridge). Without models= the worker's /v1/models is asked at start. A model with decode-role workers is served disaggregated (see --disaggregation)" },
  { group: "fleet", key: "simWorkers", flag: "sim-workers", kind: int(0, 64), default: 4, doc: "with no --worker, start this many simulated engines in-process on loopback (KV events wired in) so requests work at once; 0 = none (Node only)" },
  { group: "fleet", key: "simGpuBlocks", flag: "sim-gpu-blocks", kind: int(16, 1 << 22), default: 4096, doc: "KV blocks of each simulated engine of the built-in fleet" },
  { group: "fleet", key: "simPrefillWorkers", flag: "sim-prefill-workers", kind: int(0, 64), default: 0, doc: "with the built-in fleet: also start this many simulated prefill engines; the --sim-workers engines then serve as decode workers (disaggregated prefill/decode, see --disaggregation)" },
  { group: "fleet", key: "blockSize", flag: "block-size", kind: int(1, 1 << 16), default: 16, doc: "tokens per KV block for workers that do not say (must equal the engine's)" },
  { group: "fleet", key: "kvEvents", flag: "kv-events", kind: oneOf("auto", "on", "off"), default: "auto", doc: "default for workers without kv_events=: on = the worker pushes KV events to /admin/kv-events; off = kvgate records its own routing decisions; auto = on when every model of the worker has a precise tokenizer" },
  { group: "fleet", key: "maxAdapters", flag: "max-adapters", kind: int(0, 65_536), default: 256, doc: "LoRA adapters the fleet may know at once (configured and discovered); a worker that would bring more is refused" },
  { group: "fleet", key: "simLoraAdapters", flag: "sim-lora-adapters", kind: { type: "list" }, default: [], doc: "with the built-in fleet: LoRA adapters (comma-separated) every simulated engine serves, listed in its /v1/models with the model as parent" },
  // tokenizer
  { group: "tokenizer", key: "tokenizers", flag: "tokenizer", kind: { type: "tokenizers" }, env: "KVGATE_TOKENIZERS", default: {}, doc: "MODEL=SOURCE: precise tokenization for MODEL from SOURCE, a directory or URL prefix holding tokenizer.json and tokenizer_config.json; repeatable. Models without one are routed in approximate mode" },
  { group: "tokenizer", key: "tokenizerMaxLoaded", flag: "tokenizer-max-loaded", kind: int(1, 1024), default: 4, doc: "precise tokenizers kept in memory at once" },
  // router
  { group: "router", key: "router.policy", flag: "routing-policy", kind: oneOf("kv", "round_robin", "random", "least_loaded"), default: "kv", doc: "kv = KV-cache-aware cost function; round_robin, random, least_loaded = cache-blind baselines (benchmarks)" },
  { group: "router", key: "router.overlapWeight", flag: "overlap-weight", kind: num(0), default: 16, doc: "weight of uncached prefill blocks (this prompt's and those queued on the worker) against decode blocks in the cost; Dynamo's default is 1, kvgate's 16 puts time to first token first (see the README's routing-quality figures)" },
  { group: "router", key: "router.newPrefillFactor", flag: "new-prefill-factor", kind: num(1), default: 1.5, doc: "how much more a block the prompt must prefill weighs than a block already queued on the worker (both delay the first token; the new one is work done again and evicts other prefixes); 1 is the reference's cost" },
  { group: "router", key: "router.inflightCached", flag: "inflight-cached", kind: bool, default: true, doc: "a KV-event worker's overlap with a prompt includes the blocks an in-flight prompt there is still prefilling (its engine will have stored them when this one runs); off: only blocks its events reported, as the reference" },
  { group: "router", key: "router.temperature", flag: "temperature", kind: num(0), default: 0, doc: "0 = cheapest worker; > 0 samples a softmax over normalised costs" },
  { group: "router", key: "router.assumeKvReuse", flag: "assume-kv-reuse", kind: bool, default: true, doc: "count prompt blocks shared by in-flight requests once per worker" },
  { group: "router", key: "router.queueThreshold", flag: "queue-threshold", kind: { type: "int-or-off", min: 0, max: 1_000_000 }, default: 4, doc: "park requests when every worker holds more than this × max batched tokens of prefill; off disables the queue" },
  { group: "router", key: "router.queuePolicy", flag: "queue-policy", kind: oneOf("fcfs", "lcfs", "wspt"), default: "fcfs", doc: "order of the admission queue" },
  { group: "router", key: "router.queueMaxLength", flag: "queue-max-length", kind: int(0), default: 1024, doc: "requests parked at once; more get 429" },
  { group: "router", key: "router.queueMaxWaitMs", flag: "queue-max-wait-ms", kind: int(0), default: 60_000, doc: "longest wait in the queue before 429" },
  { group: "router", key: "router.retryAfterMs", flag: "retry-after-ms", kind: int(0), default: 1_000, doc: "Retry-After suggested with a 429" },
  { group: "router", key: "router.busyDecodeBlocksFrac", flag: "busy-decode-blocks-frac", kind: num(0), default: undefined, doc: "a worker is busy above this fraction of its KV blocks in active decode (needs total_kv_blocks); unset = off" },
  { group: "router", key: "router.busyPrefillTokens", flag: "busy-prefill-tokens", kind: num(0), default: undefined, doc: "a worker is busy above this many active prefill tokens; unset = off" },
  { group: "router", key: "router.busyPrefillTokensFrac", flag: "busy-prefill-tokens-frac", kind: num(0), default: undefined, doc: "a worker is busy above this fraction of max_batched_tokens in active prefill; unset = off" },
  { group: "router", key: "router.sessionHeader", flag: "session-header", kind: str, default: "x-session-id", doc: "request header carrying a session id (sticky routing)" },
  { group: "router", key: "router.tenantHeader", flag: "tenant-header", kind: str, default: "", doc: "request header naming the tenant (e.g. x-tenant-id): a request without cache_salt gets the header's value as its cache_salt (sent to the worker) and cache namespace, so tenants never share predicted prefixes; empty = off" },
  { group: "router", key: "router.affinityMode", flag: "affinity-mode", kind: oneOf("hard", "soft"), default: "hard", doc: "hard: a session stays on its worker; soft: its worker is preferred" },
  { group: "router", key: "router.sessionTtlMs", flag: "session-ttl-ms", kind: int(0), default: 300_000, doc: "idle time before a session binding is forgotten; 0 disables sessions" },
  { group: "router", key: "router.approxTtlMs", flag: "approx-ttl-ms", kind: int(1), default: 120_000, doc: "lifetime of blocks kvgate records for workers without KV events" },
  { group: "router", key: "router.closedLoop", flag: "closed-loop", kind: bool, default: true, doc: "check each response's reported cached tokens against the prediction: drop a KV-event worker's index entries when its engine keeps reporting far fewer hits (its view went stale), and learn each approximate worker's block lifetime (--approx-ttl-ms is the start)" },
  { group: "router", key: "router.decodeAware", flag: "decode-aware", kind: bool, default: true, doc: "count the KV blocks each in-flight request is expected to grow to while decoding (its output length predicted from its session, max_tokens and recent answers), not only its prompt blocks" },
  { group: "router", key: "router.hotPrefixSpread", flag: "hot-prefix-spread", kind: bool, default: true, doc: "serve a hot prompt prefix (its first block) from k workers, k growing and shrinking with its share of the fleet's booked KV blocks (more than 0.8 of one worker's fair share gets another worker), those already caching it first, instead of letting it swing between its cache owner and the least loaded worker; a worker elsewhere wins only when it costs less than 2/3 of the cheapest of them" },
  { group: "router", key: "router.sessionMaxEntries", flag: "session-max-entries", kind: int(1, 1 << 24), default: 65_536, doc: "sessions remembered at once (memory ≈ 300 bytes + the id each); a new session beyond it, once idle ones are reaped, gets 503 KVGATE_ERR_SESSION_LIMIT" },
  { group: "router", key: "router.sessionMaxIdBytes", flag: "session-max-id-bytes", kind: int(1, 65_536), default: 256, doc: "longest session id accepted (UTF-8 bytes); a longer one gets 400" },
  { group: "router", key: "router.staleBookingMs", flag: "stale-booking-ms", kind: int(1), default: 300_000, doc: "bookings older than this are freed (a lost stream cannot leak load)" },
  { group: "router", key: "router.planTtlMs", flag: "plan-ttl-ms", kind: int(1), default: 300_000, doc: "two-phase routing: a plan (POST /v1/route with commit) not completed or cancelled this long after its commit is freed" },
  { group: "router", key: "router.maxOpenPlans", flag: "max-open-plans", kind: int(0), default: 4096, doc: "two-phase routing: plans open at once; further commits get 503; 0 disables commit" },
  { group: "router", key: "disagg.flow", flag: "disaggregation", kind: oneOf("vllm", "sglang"), default: "vllm", doc: "how prefill-role and decode-role workers share a request (for models that have decode workers): vllm = the prefill worker runs it with max_tokens 1 and kv_transfer_params {do_remote_decode: true}, then the decode worker streams it with the kv_transfer_params the prefill returned (NixlConnector); sglang = bootstrap_host/bootstrap_port/bootstrap_room are added and the request goes to both at once, the client reading the decode's stream" },
  { group: "router", key: "disagg.localPrefillBelow", flag: "disagg-local-prefill-below", kind: int(0), default: 512, doc: "vllm flow: serve the request on the decode worker alone (local prefill) when fewer than this many of its prompt tokens are uncached there; 0 = always prefill remotely" },
  { group: "router", key: "disagg.prefillBusyFrac", flag: "disagg-prefill-busy-frac", kind: num(0), default: 1, doc: "vllm flow: local prefill when the prefill worker kvgate would pick holds more than this × its max_batched_tokens of prefill (or every prefill worker is busy / the pool would queue)" },
  { group: "router", key: "router.seed", flag: "seed", kind: int(0, 0xffffffff), default: 0x6b766761, doc: "seed of the router's random choices" },
  // index
  { group: "index", key: "index.capacity", flag: "index-capacity", kind: int(1024, 1 << 26), default: undefined, doc: "(worker, block) entries the index holds, fixed at start; memory grows with it (2^18 ≈ 50 MB; keep ≤ 2^17 on Workers); unset = the configured workers' total_kv_blocks × 1.25 (×2 without KV events), or 2^18 when none states it" },
  { group: "index", key: "index.maxSlots", flag: "index-max-slots", kind: int(1, 4096), default: 64, doc: "worker data-parallel ranks the index can hold" },
  { group: "index", key: "index.matchJump", flag: "index-match-jump", kind: int(1, 1024), default: DEFAULT_MATCH_JUMP, doc: "blocks a prefix match skips while every worker still matching holds the block past them (exact when engines evict a prompt's tail blocks first, as vLLM and SGLang do; a worker with a hole inside a skipped run is matched past it); 1 = probe every block" },
  { group: "index", key: "index.promptMemoMb", flag: "prompt-memo-mb", kind: int(0, 1024), default: 8, doc: "MiB of recent prompts (128 at most) kept with their block hashes, so a prompt that repeats or extends one (a conversation's next turn, a shared system prompt) compares tokens instead of hashing them; 0 = off" },
  { group: "index", key: "index.maxPromptTokens", flag: "max-prompt-tokens", kind: int(16, 1 << 26), default: 131_072, doc: "longest prompt routed by cache; longer ones get 400" },
  // upstream
  { group: "upstream", key: "upstream.headersTimeoutMs", flag: "upstream-timeout-ms", kind: int(1), default: 300_000, doc: "wait for a worker's response headers (a non-streamed response's headers come when it is done); then 504 or retry" },
  { group: "upstream", key: "upstream.idleTimeoutMs", flag: "upstream-idle-timeout-ms", kind: int(1), default: 120_000, doc: "longest silence inside a worker's response body before the attempt counts as failed" },
  { group: "upstream", key: "upstream.streamLeaseMs", flag: "stream-lease-ms", kind: int(0), default: undefined, doc: "a streamed response whose client has not read for this long gives back its booking (for runtimes that drop a gone client without telling kvgate); unset: 10000 on Workers, 0 (off) elsewhere" },
  { group: "upstream", key: "upstream.retries", flag: "retries", kind: int(0, 16), default: 2, doc: "further workers tried when one fails before the first token (connect error, 408/429/5xx, broken stream)" },
  { group: "upstream", key: "upstream.hedgeBudget", flag: "hedge-budget", kind: num(0, 1), default: 0, doc: "TTFT hedging for streams: at most this share of requests get a copy on the next best worker when their first token is later than --hedge-quantile of their prompt size (the first to answer serves, the other is cancelled and its booking freed); 0 = off" },
  { group: "upstream", key: "upstream.hedgeQuantile", flag: "hedge-quantile", kind: num(0.5, 0.999), default: 0.95, doc: "TTFT percentile, learnt per prompt-size class (powers of two of prompt tokens), after which a stream is hedged" },
  { group: "upstream", key: "upstream.hedgeMinSamples", flag: "hedge-min-samples", kind: int(1, 100_000), default: 50, doc: "first-token times a prompt-size class needs before its requests can be hedged" },
  { group: "upstream", key: "upstream.migrationLimit", flag: "migration-limit", kind: int(0, 16), default: 3, doc: "times a stream that broke after its first token is continued on another worker; 0 disables" },
  { group: "upstream", key: "upstream.streamUsage", flag: "stream-usage", kind: bool, default: true, doc: "ask streaming workers for usage (include_usage) to measure actual cache hits; the extra chunk is removed when the client did not ask" },
  { group: "upstream", key: "upstream.healthProbeMs", flag: "health-probe-ms", kind: int(0), default: 2_000, doc: "a worker that refused a connection is marked unhealthy and its /health probed this often; 0 = never mark" },
  // ops: health, circuit breaking, engine load
  { group: "ops", key: "ops.healthCheckMs", flag: "health-check-ms", kind: int(0), default: 5_000, doc: "probe every worker's GET /health this often; failing workers are drained (no new requests, in-flight ones finish) and return when they pass; 0 = probe only workers that refused a connection" },
  { group: "ops", key: "ops.healthTimeoutMs", flag: "health-timeout-ms", kind: int(1), default: 2_000, doc: "a health probe not answered within this counts as failed" },
  { group: "ops", key: "ops.healthFailThreshold", flag: "health-fail-threshold", kind: int(1, 1000), default: 3, doc: "failed probes in a row that take a worker out of rotation" },
  { group: "ops", key: "ops.healthSuccessThreshold", flag: "health-success-threshold", kind: int(1, 1000), default: 2, doc: "passed probes in a row that bring it back" },
  { group: "ops", key: "ops.circuitFailures", flag: "circuit-failures", kind: int(0, 1000), default: 5, doc: "failed attempts in a row at a worker (connect errors, timeouts, 5xx, broken streams) that open its circuit: no new requests for --circuit-open-ms, then one trial request; 0 = no circuit breaker" },
  { group: "ops", key: "ops.circuitOpenMs", flag: "circuit-open-ms", kind: int(1), default: 30_000, doc: "how long an open circuit keeps a worker out before its trial request" },
  { group: "ops", key: "ops.engineMetricsMs", flag: "engine-metrics-ms", kind: int(0), default: 0, doc: "scrape every worker's /metrics (vLLM or SGLang names) this often for its own view of its load: running and waiting requests and KV usage feed the busy checks and the cost; 0 = off" },
  { group: "ops", key: "ops.engineMetricsStaleAfter", flag: "engine-metrics-stale-after", kind: int(1, 1000), default: 3, doc: "scrape intervals without a good scrape after which a worker's metrics are stale: it counts as busy (saturated) until one succeeds" },
  { group: "ops", key: "ops.busyEngineWaiting", flag: "busy-engine-waiting", kind: num(0), default: undefined, doc: "a worker rank is busy while its engine reports more than this many waiting requests (needs --engine-metrics-ms); unset = off" },
  // decisions (docs/observability.md)
  { group: "ops", key: "decisions.recent", flag: "decisions-recent", kind: int(0, 100_000), default: 100, doc: "routing decisions (with every candidate's overlap, load and cost) kept in memory for GET /v1/stats and the dashboard; 0 = none kept" },
  { group: "ops", key: "decisions.log", flag: "decision-log", kind: str, default: "", doc: "append every routing decision's inputs and outcome to this JSONL file, for `kvgate explain --decisions FILE` (Node; rotated to FILE.1, FILE.2, …); empty = off" },
  { group: "ops", key: "decisions.logMaxBytes", flag: "decision-log-max-bytes", kind: int(4096), default: 64 << 20, doc: "size at which the decision log is rotated" },
  { group: "ops", key: "decisions.logKeep", flag: "decision-log-keep", kind: int(0, 1000), default: 3, doc: "rotated decision-log files kept beside the current one (FILE.1 newest); older ones are deleted" },
  { group: "ops", key: "decisions.logTokens", flag: "decision-log-tokens", kind: bool, default: false, doc: "also log each prompt's token ids, so `kvgate explain` re-hashes them and checks the logged block hashes (larger log)" },
  { group: "ops", key: "ops.busyEngineKvUsage", flag: "busy-engine-kv-usage", kind: num(0, 1), default: undefined, doc: "a worker rank is busy while its engine reports KV-cache usage above this fraction (needs --engine-metrics-ms); unset = off" },
];

/** KVGATE_ + the flag in upper snake case, unless the option names its own. */
export function envName(o: OptionSpec): string {
  return o.env ?? `KVGATE_${o.flag.replace(/-/g, "_").toUpperCase()}`;
}

/** Flags that are not options: where the JSON file is, and help. */
export const CONFIG_FILE_FLAG = "config";
export const CONFIG_FILE_ENV = "KVGATE_CONFIG";
/** Inline JSON config, for hosts without a file system (Workers: a `[vars]` entry or secret). */
export const CONFIG_JSON_ENV = "KVGATE_CONFIG_JSON";
