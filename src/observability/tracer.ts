/**
 * @module A small OpenTelemetry tracer behind the `@opentelemetry/api` Tracer interface: sampling per
 * OTEL_TRACES_SAMPLER, recording spans, handing ended ones to the OTLP exporter. Written here rather than using
 * @opentelemetry/sdk-trace-base 2.12.1 because that SDK's entry imports @opentelemetry/core and /resources, whose
 * platform code (util, os, process, child_process) does not bundle for workerd; this runs unchanged on all four
 * runtimes (crypto.getRandomValues, performance, fetch). Contexts are passed explicitly (no context manager needed).
 */
import {
  SpanKind, SpanStatusCode, trace, TraceFlags, type Attributes, type AttributeValue, type Context, type Exception, type Link, type Span,
  type SpanContext, type SpanOptions, type SpanStatus, type TimeInput, type Tracer,
} from "@opentelemetry/api";
import type { SamplerName } from "./otel-config.ts";

/** A span once ended, as the exporter reads it. Times are epoch milliseconds (fractional). */
export interface EndedSpan {
  name: string;
  kind: SpanKind;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  startMs: number;
  endMs: number;
  attributes: Attributes;
  events: { name: string; timeMs: number; attributes: Attributes }[];
  status: SpanStatus;
}

export interface SpanSink {
  onEnd(span: EndedSpan): void;
}

/** Epoch milliseconds with performance.now()'s resolution. */
export function epochNow(): number {
  return performance.timeOrigin > 0 ? performance.timeOrigin + performance.now() : Date.now();
}

function toMs(t: TimeInput | undefined): number {
  if (t === undefined) return epochNow();
  if (typeof t === "number") return t;
  if (t instanceof Date) return t.getTime();
  return t[0] * 1000 + t[1] / 1e6;
}

function randomHex(bytes: number): string {
  const b = new Uint8Array(bytes);
  do crypto.getRandomValues(b); while (b.every((x) => x === 0));
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}

class RecordingSpan implements Span {
  readonly #sc: SpanContext;
  #name: string;
  readonly #kind: SpanKind;
  readonly #parent: string | undefined;
  readonly #start: number;
  readonly #attributes: Attributes = {};
  readonly #events: EndedSpan["events"] = [];
  #status: SpanStatus = { code: SpanStatusCode.UNSET };
  #ended = false;

  constructor(private readonly sink: SpanSink, name: string, sc: SpanContext, parent: string | undefined, opts: SpanOptions) {
    this.#sc = sc;
    this.#name = name;
    this.#kind = opts.kind ?? SpanKind.INTERNAL;
    this.#parent = parent;
    this.#start = toMs(opts.startTime);
    if (opts.attributes) this.setAttributes(opts.attributes);
  }

  spanContext(): SpanContext {
    return this.#sc;
  }

  setAttribute(key: string, value: AttributeValue | undefined): this {
    if (!this.#ended && value !== undefined) this.#attributes[key] = value;
    return this;
  }

  setAttributes(attributes: Attributes): this {
    for (const [k, v] of Object.entries(attributes)) this.setAttribute(k, v);
    return this;
  }

  addEvent(name: string, attributesOrTime?: Attributes | TimeInput, time?: TimeInput): this {
    if (this.#ended) return this;
    const isTime = typeof attributesOrTime === "number" || attributesOrTime instanceof Date || Array.isArray(attributesOrTime);
    this.#events.push({ name, timeMs: toMs(isTime ? (attributesOrTime as TimeInput) : time), attributes: isTime ? {} : { ...(attributesOrTime as Attributes | undefined) } });
    return this;
  }

  // Links are not exported by this tracer (kvgate creates none); accepted so callers of the API need not care.
  addLink(_link: Link): this {
    return this;
  }

  addLinks(_links: Link[]): this {
    return this;
  }

  setStatus(status: SpanStatus): this {
    if (!this.#ended) this.#status = { ...status };
    return this;
  }

  updateName(name: string): this {
    if (!this.#ended) this.#name = name;
    return this;
  }

  end(endTime?: TimeInput): void {
    if (this.#ended) return;
    this.#ended = true;
    this.sink.onEnd({
      name: this.#name, kind: this.#kind, traceId: this.#sc.traceId, spanId: this.#sc.spanId, parentSpanId: this.#parent,
      startMs: this.#start, endMs: Math.max(this.#start, toMs(endTime)), attributes: this.#attributes, events: this.#events, status: this.#status,
    });
  }

  isRecording(): boolean {
    return !this.#ended;
  }

  recordException(exception: Exception, time?: TimeInput): void {
    const e = typeof exception === "string" ? { message: exception } : exception;
    this.addEvent("exception", { "exception.type": String(e.name ?? "Error"), "exception.message": String(e.message ?? "") }, time);
  }
}

export class KvgateTracer implements Tracer {
  constructor(private readonly sink: SpanSink, private readonly sampler: SamplerName, private readonly ratio: number) {}

  startSpan(name: string, options: SpanOptions = {}, context?: Context): Span {
    const parent = options.root || !context ? undefined : trace.getSpanContext(context);
    const valid = parent !== undefined && trace.isSpanContextValid(parent);
    const traceId = valid ? parent.traceId : randomHex(16);
    const sampled = this.#sample(valid ? parent : undefined, traceId);
    const sc: SpanContext = { traceId, spanId: randomHex(8), traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE };
    // Not sampled: a non-recording span that still carries the ids, so traceparent keeps flowing to the engines.
    if (!sampled) return trace.wrapSpanContext(sc);
    return new RecordingSpan(this.sink, name, sc, valid ? parent.spanId : undefined, options);
  }

  startActiveSpan<F extends (span: Span) => unknown>(name: string, ...args: unknown[]): ReturnType<F> {
    const fn = args[args.length - 1] as F;
    const opts = (args.length >= 2 ? args[0] : undefined) as SpanOptions | undefined;
    const ctx = (args.length >= 3 ? args[1] : undefined) as Context | undefined;
    return fn(this.startSpan(name, opts, ctx)) as ReturnType<F>;
  }

  #sample(parent: SpanContext | undefined, traceId: string): boolean {
    if (this.sampler.startsWith("parentbased_") && parent) return (parent.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED;
    switch (this.sampler) {
      case "always_off":
      case "parentbased_always_off":
        return false;
      case "traceidratio":
      case "parentbased_traceidratio":
        // The trace id's last 8 hex digits as a uniform draw: every service sampling this trace decides alike.
        return parseInt(traceId.slice(-8), 16) / 0x1_0000_0000 < this.ratio;
      default:
        return true;
    }
  }
}
