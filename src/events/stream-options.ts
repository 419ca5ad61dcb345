/**
 * @module How one engine publisher's KV-event stream is configured: the worker it feeds, its replay socket and the
 * recovery limits, on top of the ingest policy. Apart from the stream so transports can build options without it.
 */
import type { IngestPolicyOptions } from "./ingest-policy.ts";
import type { SeqFrame } from "./zmq-frames.ts";

/** The engine's replay buffer: batches from `fromSeq` on, ending at the END marker; rejects when unavailable. */
export interface ReplaySource {
  replay(fromSeq: number): AsyncIterable<SeqFrame>;
}

export interface KvEventStreamOptions extends IngestPolicyOptions {
  worker: string;
  /** The publisher's data-parallel rank, used for batches that carry none. Default 0. */
  dpRank?: number;
  /** The engine's replay socket; without one, every gap makes the worker cold. */
  replay?: ReplaySource;
  /** When the first batch seen is not seq 0, fetch the engine's buffered history from 0. Default true. */
  replayOnJoin?: boolean;
  /** Live batches held while a replay runs (vLLM buffers 10,000 steps). Beyond it they are dropped and re-fetched. */
  maxHeld?: number;
  /** Replays chained back to back before giving up on a stream that keeps gapping. Default 3. */
  maxReplayRounds?: number;
  /** A cold worker counts as rebuilt once this many blocks were stored after the clear (e.g. its KV capacity). */
  rebuildAfterBlocks?: number;
  /** Decode batches in the WASM core when it can (default true); false keeps them all on the TypeScript decoder. */
  coreDecode?: boolean;
  /** Told about state changes (cold, rebuilt, restart, replay failures) for logging. */
  onNotice?: (notice: StreamNotice) => void;
  /** Sees every batch handed to the stream (before ordering and dedupe), e.g. to share it with router replicas; must not keep `payload`. */
  onReceived?: (stream: { readonly worker: string; readonly dpRank: number; readonly eagleEvents: number }, seq: number, payload: Uint8Array) => void;
}

export interface StreamNotice {
  worker: string;
  dpRank: number;
  kind: "cold" | "rebuilt" | "restart" | "replay-failed" | "apply-error";
  detail: string;
}

