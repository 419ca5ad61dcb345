/**
 * @module The gateway's tracing: off (no spans are made at all) unless the OTEL_* variables name an OTLP endpoint or
 * an embedder hands in its own `@opentelemetry/api` Tracer; then kvgate's tracer and OTLP/HTTP JSON exporter.
 */
import type { Tracer } from "@opentelemetry/api";
import { tracingConfigFromEnv } from "./otel-config.ts";
import { OtlpExporter } from "./otlp-exporter.ts";
import { KvgateTracer } from "./tracer.ts";

export interface Tracing {
  /** undefined: tracing is off. */
  readonly tracer: Tracer | undefined;
  /** kvgate's own exporter, when it exports (not for an embedder's tracer). */
  readonly exporter?: OtlpExporter;
  /** Sends what is queued (the Workers adapter calls it under waitUntil; tests before reading the collector). */
  flush(): Promise<void>;
}

export function createTracing(opts: { env?: Readonly<Record<string, string | undefined>>; tracer?: Tracer; fetch: typeof fetch; warn?: (m: string) => void }): Tracing {
  if (opts.tracer) return { tracer: opts.tracer, flush: async () => {} };
  const config = opts.env ? tracingConfigFromEnv(opts.env) : undefined;
  if (!config) return { tracer: undefined, flush: async () => {} };
  const exporter = new OtlpExporter(config, opts.fetch, undefined, opts.warn);
  return { tracer: new KvgateTracer(exporter, config.sampler, config.ratio), exporter, flush: () => exporter.flush() };
}
