/**
 * @module What replica sharing needs of a NATS connection, declared here so src/replicas/ stays runtime-neutral: the
 * runtime adapter (src/adapter/node/nats-bus.ts) builds one over the NATS client and the gateway only holds it.
 */

/** One message as delivered: plain NATS or from the JetStream stream. */
export interface SyncMessage {
  subject: string;
  data: Uint8Array;
  header(name: string): string | undefined;
  /** Stream messages only: how many the stream holds after this one for this replica, and when it stored it (wall ms). */
  streamPending?: number;
  storedAtMs?: number;
}

export interface SyncBusOptions {
  /** nats://host:port, comma-separated for several. */
  servers: string;
  /** Connection name shown by the server (the replica id). */
  name: string;
  /** The JetStream stream of KV events and the subjects it captures. */
  stream: string;
  streamSubjects: string;
  streamMaxAgeMs: number;
  streamMaxMsgs: number;
  log: (line: string) => void;
}

/**
 * A NATS connection that connects and reconnects by itself. Publishes while disconnected are buffered by the client up
 * to a bound and flushed on reconnect; beyond it they are dropped (publish returns false).
 */
export interface SyncBus {
  readonly connected: boolean;
  publish(subject: string, data: Uint8Array, headers?: Readonly<Record<string, string>>): boolean;
  /** A plain NATS subscription (wildcards allowed), kept across reconnects. */
  subscribe(subject: string, onMessage: (m: SyncMessage) => void): void;
  /** The stream's messages from its first on, in order, then live; resumes after the last one seen when NATS comes back. */
  consumeStream(onMessage: (m: SyncMessage) => void): void;
  /** Told on every connect (true) and disconnect (false). */
  onStatus(listener: (connected: boolean) => void): void;
  close(): Promise<void>;
}

/** Built by the runtime adapter; returns at once and connects in the background. */
export type SyncBusFactory = (options: SyncBusOptions) => SyncBus;
