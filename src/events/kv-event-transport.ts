/**
 * @module What the gateway's KV ingest needs of a ZeroMQ transport, declared below both: the runtime adapter builds
 * one (src/zmq/kv-event-subscriber.ts) and the gateway only holds it, so neither imports the other.
 */
import type { KvEventStreamOptions } from "./kv-event-stream.ts";
import type { KvEventHub } from "./kv-event-hub.ts";

/** Where an engine's ZeroMQ sockets are, as the subscriber needs it. */
export interface ZmqAttachment extends Omit<KvEventStreamOptions, "dpRank" | "replay"> {
  endpoint: string;
  replayEndpoint?: string;
  dpRanks: readonly number[];
  topic?: string;
}

/** Connection counters of a ZeroMQ transport, summed over its sockets. */
export interface ZmqConnectionCounters {
  connects: number;
  disconnects: number;
  socketErrors: number;
  protocolErrors: number;
}

/** A ZeroMQ subscriber over the shared hub (src/zmq/kv-event-subscriber.ts satisfies it). */
export interface KvEventTransport {
  /** Its sockets' connection counters, for /metrics. */
  readonly transport?: Readonly<ZmqConnectionCounters>;
  attach(a: ZmqAttachment): Promise<unknown>;
  detach(worker: string, opts?: { keepEntries?: boolean }): Promise<void>;
  close(): Promise<void>;
}

/** `log` takes the transport's warnings (a peer breaking the protocol, …), one line each. */
export type KvEventTransportFactory = (hub: KvEventHub, log: (line: string) => void) => Promise<KvEventTransport>;
