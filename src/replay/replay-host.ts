/**
 * @module What the replay needs from the runtime it runs on (servers, files, stdio, time), so everything under
 * src/replay/ stays Web-standard. src/adapter/node/replay-host.ts implements it for Node; tests pass their own.
 */
import type { EncodedKvBatch } from "../sim/kv-event-sink.ts";
import type { SimEngineOptions } from "../sim/sim-options.ts";
import type { WallClock } from "./schedule.ts";
import type { DecisionLogFactory } from "../decisions/decision-log-sink.ts";

/** A Web-standard request handler (what kvgate's gateway exposes as `fetch`). */
export type FetchHandler = (req: Request) => Promise<Response>;

export interface RunningServer {
  /** Base URL, e.g. http://127.0.0.1:41234 (no trailing slash). */
  url: string;
  close(): Promise<void>;
}

export interface FleetSpec {
  /** One entry per engine; each names its `workerId`. */
  engines: SimEngineOptions[];
  /** Deliver every engine's KV-event batches (vLLM msgpack, per-engine sequence numbers) to `onBatch`, in order. */
  onBatch?: (batch: EncodedKvBatch) => void;
}

export interface RunningFleet {
  /** Base URLs in the order of `engines`. */
  urls: string[];
  close(): Promise<void>;
}

export interface ReplayHost {
  /** Starts simulated engines behind HTTP on loopback (in this thread or another: the host decides). */
  startFleet(spec: FleetSpec): Promise<RunningFleet>;
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
  /** Opens a decision log file (`--decision-log`); absent where there are no files. */
  decisionLog?: DecisionLogFactory;
}
