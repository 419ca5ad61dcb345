/**
 * @module Tracing configuration from the standard OpenTelemetry variables (the adapters read their runtime's env and
 * pass it in): OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP(_TRACES)_HEADERS,
 * OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG), OTEL_TRACES_EXPORTER, OTEL_SDK_DISABLED,
 * OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE.
 */
import { KvgateError } from "../core/errors.ts";

export type SamplerName = "always_on" | "always_off" | "traceidratio" | "parentbased_always_on" | "parentbased_always_off" | "parentbased_traceidratio";
const SAMPLERS: readonly SamplerName[] = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"];

export interface TracingConfig {
  /** Where spans are POSTed (OTLP/HTTP, JSON encoding). */
  url: string;
  headers: Record<string, string>;
  resource: Record<string, string>;
  sampler: SamplerName;
  ratio: number;
  scheduleDelayMs: number;
  maxQueueSize: number;
  maxExportBatchSize: number;
}

type Env = Readonly<Record<string, string | undefined>>;

function bad(message: string): never {
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message);
}

/** `k=v,k2=v2` with percent-encoded values (the OTEL list format). */
function pairs(name: string, v: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!v) return out;
  for (const item of v.split(",")) {
    if (item.trim() === "") continue;
    const at = item.indexOf("=");
    if (at <= 0) bad(`${name}: expected key=value pairs, got ${JSON.stringify(item)}`);
    out[item.slice(0, at).trim()] = decodeURIComponent(item.slice(at + 1).trim());
  }
  return out;
}

function positiveInt(env: Env, name: string, dflt: number): number {
  const v = env[name];
  if (v === undefined || v === "") return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) bad(`${name} must be a positive integer, got ${v}`);
  return n;
}

/** undefined when tracing is not configured (no OTLP endpoint, exporter none, or the SDK disabled): spans stay no-ops. */
export function tracingConfigFromEnv(env: Env): TracingConfig | undefined {
  if ((env.OTEL_SDK_DISABLED ?? "").toLowerCase() === "true") return undefined;
  const exporter = (env.OTEL_TRACES_EXPORTER ?? "otlp").toLowerCase();
  if (exporter === "none") return undefined;
  if (exporter !== "otlp") bad(`OTEL_TRACES_EXPORTER=${exporter}: kvgate exports traces over OTLP/HTTP only (otlp or none)`);
  const perSignal = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, base = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!perSignal && !base) return undefined;
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL;
  if (protocol && protocol !== "http/json" && protocol !== "http/protobuf") bad(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol}: kvgate sends OTLP/HTTP with JSON bodies`);
  // The per-signal variable is the full URL; the base one gets the signal's path appended (OTLP exporter spec).
  const url = perSignal || `${base!.replace(/\/+$/, "")}/v1/traces`;
  try {
    new URL(url);
  } catch {
    bad(`OTLP traces endpoint ${JSON.stringify(url)} is not a URL`);
  }
  const sampler = (env.OTEL_TRACES_SAMPLER ?? "parentbased_always_on").toLowerCase() as SamplerName;
  if (!SAMPLERS.includes(sampler)) bad(`OTEL_TRACES_SAMPLER=${sampler}: expected one of ${SAMPLERS.join(", ")}`);
  let ratio = 1;
  if (sampler.endsWith("traceidratio") && env.OTEL_TRACES_SAMPLER_ARG !== undefined && env.OTEL_TRACES_SAMPLER_ARG !== "") {
    ratio = Number(env.OTEL_TRACES_SAMPLER_ARG);
    if (!(ratio >= 0 && ratio <= 1)) bad(`OTEL_TRACES_SAMPLER_ARG must be a ratio in [0, 1], got ${env.OTEL_TRACES_SAMPLER_ARG}`);
  }
  const resource = pairs("OTEL_RESOURCE_ATTRIBUTES", env.OTEL_RESOURCE_ATTRIBUTES);
  resource["service.name"] = env.OTEL_SERVICE_NAME || resource["service.name"] || "kvgate";
  return {
    url, sampler, ratio, resource,
    headers: { ...pairs("OTEL_EXPORTER_OTLP_HEADERS", env.OTEL_EXPORTER_OTLP_HEADERS), ...pairs("OTEL_EXPORTER_OTLP_TRACES_HEADERS", env.OTEL_EXPORTER_OTLP_TRACES_HEADERS) },
    scheduleDelayMs: positiveInt(env, "OTEL_BSP_SCHEDULE_DELAY", 1000),
    maxQueueSize: positiveInt(env, "OTEL_BSP_MAX_QUEUE_SIZE", 2048),
    maxExportBatchSize: positiveInt(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
  };
}
