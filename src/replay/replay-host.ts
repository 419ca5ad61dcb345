/**
 * @module What the replay needs from the runtime it runs on (servers, files, stdio, time), so everything under
 * src/replay/ stays Web-standard. src/runtime/replay-node.ts implements it for Node; tests pass their own.
 */
import type { KvEventSink } from "../sim/kv-event-sink.ts";
import type { SimEngineOptions } from "../sim/sim-options.ts";
import type { WallClock } from "./engine-clock.ts";
import type { FetchHandler } from "./router-front.ts";

export interface RunningServer {
  /** Base URL, e.g. http://127.0.0.1:41234 (no trailing slash). */
  url: string;
  close(): Promise<void>;
}

export interface SimSpec extends SimEngineOptions {
  /** In-process receivers of the engine's KV-event batches. */
  sinks?: KvEventSink[];
}

export interface ReplayHost {
  /** Starts one simulated engine behind HTTP on loopback. */
  startSim(spec: SimSpec): Promise<RunningServer>;
  /** Serves a fetch handler over HTTP on loopback. */
  serve(handler: FetchHandler): Promise<RunningServer>;
  /** A file (or, for http(s) URLs, a download) as a byte stream. */
  open(pathOrUrl: string): Promise<ReadableStream<Uint8Array>>;
  writeFile(path: string, text: string): Promise<void>;
  stdout(text: string): void;
  /** Progress and diagnostics. */
  stderr(text: string): void;
  /** Whether stderr is a terminal (the progress bar then redraws one line). */
  stderrIsTTY: boolean;
  wall: WallClock;
  fetch: typeof fetch;
}
