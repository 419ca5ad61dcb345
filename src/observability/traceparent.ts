/**
 * @module W3C Trace Context `traceparent` (https://www.w3.org/TR/trace-context/): parsing an incoming one into a span
 * context and writing one for the upstream request. Written here (a few lines) rather than taken from
 * @opentelemetry/core, whose package entry pulls in Node-only platform code that does not bundle for workerd.
 */
import type { SpanContext } from "@opentelemetry/api";

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?$/;

/** The remote parent a `traceparent` names, or undefined when absent or invalid (then the request starts a trace). */
export function parseTraceparent(value: string | null | undefined): SpanContext | undefined {
  if (!value) return undefined;
  const m = TRACEPARENT.exec(value.trim().toLowerCase());
  if (!m) return undefined;
  const [, version, traceId, spanId, flags] = m as unknown as [string, string, string, string, string];
  // Version ff is invalid; version 00 allows nothing after the flags.
  if (version === "ff" || (version === "00" && value.trim().length !== 55)) return undefined;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId, traceFlags: parseInt(flags, 16) & 1, isRemote: true };
}

export function formatTraceparent(sc: SpanContext): string {
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 1) === 1 ? "01" : "00"}`;
}
