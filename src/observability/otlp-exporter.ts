/**
 * @module Ended spans to an OTLP/HTTP collector, JSON-encoded (portable: fetch and JSON only): a bounded queue
 * (OTEL_BSP_MAX_QUEUE_SIZE; spans beyond it are dropped and counted) sent in batches every OTEL_BSP_SCHEDULE_DELAY ms
 * or as soon as a batch fills. Export failures are counted, never thrown at the request path.
 */
import type { AttributeValue, Attributes } from "@opentelemetry/api";
import type { TracingConfig } from "./otel-config.ts";
import type { EndedSpan, SpanSink } from "./tracer.ts";

export interface ExporterStats {
  exported: number;
  dropped: number;
  failedExports: number;
}

type OtlpValue = { stringValue: string } | { boolValue: boolean } | { intValue: string } | { doubleValue: number } | { arrayValue: { values: OtlpValue[] } };

function value(v: AttributeValue): OtlpValue {
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (typeof v === "number") return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  return { arrayValue: { values: (v as readonly (string | number | boolean | null | undefined)[]).filter((x) => x !== null && x !== undefined).map((x) => value(x as AttributeValue)) } };
}

function attributes(a: Attributes): { key: string; value: OtlpValue }[] {
  return Object.entries(a).filter((e): e is [string, AttributeValue] => e[1] !== undefined).map(([key, v]) => ({ key, value: value(v) }));
}

/** Epoch ms (fractional) as the decimal string of nanoseconds OTLP/JSON uses for fixed64. */
export function unixNano(ms: number): string {
  const whole = Math.floor(ms);
  return (BigInt(whole) * 1_000_000n + BigInt(Math.round((ms - whole) * 1e6))).toString();
}

/** The OTLP ExportTraceServiceRequest body for a batch. */
export function otlpBody(spans: readonly EndedSpan[], resource: Record<string, string>, scope: { name: string; version: string }): string {
  return JSON.stringify({
    resourceSpans: [{
      resource: { attributes: attributes(resource) },
      scopeSpans: [{
        scope,
        spans: spans.map((s) => ({
          traceId: s.traceId, spanId: s.spanId, ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}), name: s.name,
          // OTLP numbers kinds from 1 (INTERNAL); the API from 0.
          kind: s.kind + 1, startTimeUnixNano: unixNano(s.startMs), endTimeUnixNano: unixNano(s.endMs),
          attributes: attributes(s.attributes),
          events: s.events.map((e) => ({ timeUnixNano: unixNano(e.timeMs), name: e.name, attributes: attributes(e.attributes) })),
          status: s.status.message ? { code: s.status.code, message: s.status.message } : { code: s.status.code },
        })),
      }],
    }],
  });
}

export class OtlpExporter implements SpanSink {
  readonly stats: ExporterStats = { exported: 0, dropped: 0, failedExports: 0 };
  #queue: EndedSpan[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #sending: Promise<void> = Promise.resolve();

  constructor(private readonly config: TracingConfig, private readonly fetchFn: typeof fetch, private readonly scope = { name: "kvgate", version: "0.1.0" },
    private readonly warn: (message: string) => void = () => {}) {}

  onEnd(span: EndedSpan): void {
    if (this.#queue.length >= this.config.maxQueueSize) {
      this.stats.dropped++;
      return;
    }
    this.#queue.push(span);
    if (this.#queue.length >= this.config.maxExportBatchSize) void this.flush();
    else this.#timer ??= this.#arm();
  }

  #arm(): ReturnType<typeof setTimeout> {
    const t = setTimeout(() => {
      this.#timer = undefined;
      void this.flush();
    }, this.config.scheduleDelayMs);
    (t as { unref?: () => void }).unref?.();
    return t;
  }

  /** Spans waiting to be sent. */
  get pending(): number {
    return this.#queue.length;
  }

  /** Sends everything queued; resolves when the collector answered (or the send failed). */
  flush(): Promise<void> {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.config.maxExportBatchSize);
      this.#sending = this.#sending.then(() => this.#send(batch));
    }
    return this.#sending;
  }

  async #send(batch: EndedSpan[]): Promise<void> {
    try {
      const res = await this.fetchFn(this.config.url, {
        method: "POST", headers: { ...this.config.headers, "content-type": "application/json" }, body: otlpBody(batch, this.config.resource, this.scope),
      });
      await res.arrayBuffer().catch(() => undefined);
      if (!res.ok) throw new Error(`collector answered ${res.status}`);
      this.stats.exported += batch.length;
    } catch (e) {
      if (this.stats.failedExports++ === 0) this.warn(`OTLP export to ${this.config.url} failed: ${(e as Error).message} (further failures are counted, not logged)`);
      this.stats.dropped += batch.length;
    }
  }
}
