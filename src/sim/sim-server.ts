/**
 * @module What a running simulated engine is, declared in the sim layer so the default fleet can start engines
 * through whichever runtime adapter serves HTTP.
 */
import type { HttpPushSinkOptions } from "./http-push-sink.ts";
import type { KvEventSink } from "./kv-event-sink.ts";
import type { SimClock } from "./sim-clock.ts";
import type { SimEngine } from "./sim-engine.ts";
import type { SimEngineOptions } from "./sim-options.ts";

export interface SimServerOptions extends SimEngineOptions {
  /** Listen address; default 127.0.0.1. */
  host?: string;
  /** Default 0: any free port. */
  port?: number;
  /** Push KV events to a router over HTTP (workerId and dpRank come from the engine). */
  events?: Omit<HttpPushSinkOptions, "workerId" | "dpRank" | "clock">;
  /** Further sinks, e.g. a callbackSink feeding an in-process router. */
  sinks?: KvEventSink[];
  clock?: SimClock;
}

export interface SimServer {
  url: string;
  port: number;
  engine: SimEngine;
  /** Aborts live requests, flushes KV events, closes the listener and its connections. */
  close(): Promise<void>;
}

/** Starts one simulated engine behind an HTTP server (src/adapter/node/sim-server.ts on Node). */
export type StartSimServer = (options: SimServerOptions) => Promise<SimServer>;
