/**
 * @module What replica sharing needs of a NATS connection, declared here so src/replicas/ stays runtime-neutral: the
 * runtime adapter (src/adapter/node/nats-bus.ts) builds one over the NATS client and the gateway only holds it.
 */

/** One message as delivered: plain NATS or from the JetStream stream. */
export interface SyncMessage {
  subject: string;
  /** The stream sequence (messages from the JetStream stream only). */
  seq?: number;
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

/** Where the stream's ordered consumer starts. */
export interface StreamStart {
  /**
   * Asked once, when the connection is first up: the stream sequence already covered (a loaded snapshot's), so the
   * consumer starts after it; 0 = from the first message.
   */
  coveredSeq?: () => Promise<number>;
}

/** A JetStream key-value bucket (last value per key, entries expire after the bucket's TTL). */
export interface SyncKv {
  /** Resolves false when it could not be stored (NATS down, refused); never rejects. */
  put(key: string, value: Uint8Array): Promise<boolean>;
  /** Every key's current value, once (waits for the connection; rejects on errors). */
  entries(): Promise<[string, Uint8Array][]>;
  /** Every key's current value, then each change (undefined value: deleted or purged); kept across reconnects. */
  watch(onEntry: (key: string, value: Uint8Array | undefined) => void): void;
}

export interface SyncKvOptions {
  ttlMs: number;
  maxValueBytes: number;
}

export interface SyncObjectInfo {
  name: string;
  size: number;
  metadata: Readonly<Record<string, string>>;
}

/** A JetStream object store bucket. Calls reject while NATS is down. */
export interface SyncObjects {
  put(name: string, data: Uint8Array, metadata: Readonly<Record<string, string>>): Promise<void>;
  list(): Promise<SyncObjectInfo[]>;
  /** The object's bytes (checked against its digest by the client), or undefined when there is none. */
  get(name: string): Promise<Uint8Array | undefined>;
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
  consumeStream(onMessage: (m: SyncMessage) => void, start?: StreamStart): void;
  /** A key-value bucket (created when missing); absent on buses without JetStream KV. */
  kv?(bucket: string, options: SyncKvOptions): SyncKv;
  /** An object store bucket (created when missing); absent on buses without JetStream objects. */
  objects?(bucket: string, options: { maxBytes: number }): SyncObjects;
  /** Told on every connect (true) and disconnect (false). */
  onStatus(listener: (connected: boolean) => void): void;
  close(): Promise<void>;
}

/** Built by the runtime adapter; returns at once and connects in the background. */
export type SyncBusFactory = (options: SyncBusOptions) => SyncBus;
