/**
 * @module The few ZeroMQ socket operations kvgate's KV-event ingest needs (SUB and DEALER), so the subscriber, the
 * replay client and the bridge run over either kvgate's own ZMTP client (zmtp-sockets.ts, every runtime with TCP) or
 * the native `zeromq` module (src/adapter/node/zmq-native.ts, Node only), whichever the runtime adapter supplies.
 */

/** What a socket reports about its connections (all optional). */
export interface SocketEvents {
  /** A connection to a peer is up (handshake done for ZMTP; TCP connect or accept for native). */
  onConnect?(): void;
  onDisconnect?(): void;
  /** A connection was closed because the peer broke the protocol or the stream failed (the socket reconnects). */
  onError?(error: Error): void;
}

export interface SubSocketOptions extends SocketEvents {
  /** Reconnect backoff: first wait, doubling up to the max. Defaults 100 ms and 5,000 ms. */
  reconnectIntervalMs?: number;
  reconnectMaxIntervalMs?: number;
  /** Messages held before the socket stops reading (the publisher then drops at its own high-water mark). */
  receiveHighWaterMark?: number;
}

export interface DealerSocketOptions extends SocketEvents {
  /** Longest wait for a reply, and for a peer to send the request to. */
  timeoutMs: number;
}

/** A message handed to a listener as it is decoded. Its frames may view a reused read buffer: valid during the call. */
export type MessageListener = (frames: readonly Uint8Array[]) => void;

/** A SUB socket: messages are frame arrays; iteration ends (or throws) once closed. */
export interface SubSocket extends AsyncIterable<Uint8Array[]> {
  readonly closed: boolean;
  /** Receives messages whose first frame starts with `prefix` ("" = all). */
  subscribe(prefix: string): void;
  /** Connects (reconnecting by itself until closed) to `tcp://host:port`. */
  connect(endpoint: string): void;
  bind(endpoint: string): Promise<void>;
  close(): void;
  /**
   * Optional (kvgate's ZMTP client): every message goes to `listener` synchronously as it is decoded, instead of to
   * the iterator; frames may view a reused read buffer, so they are valid during the call only. Resolves once closed.
   */
  listen?(listener: MessageListener): Promise<void>;
}

export interface DealerSocket {
  readonly closed: boolean;
  connect(endpoint: string): void;
  /** Resolves once the message is handed to a connected peer; rejects after the timeout. */
  send(frames: Uint8Array[]): Promise<void>;
  /** The next message; rejects after the timeout or when closed. */
  receive(): Promise<Uint8Array[]>;
  close(): void;
}

/** A ZeroMQ implementation. */
export interface ZmqSockets {
  readonly name: "zeromq" | "zmtp";
  subscriber(options: SubSocketOptions): SubSocket;
  dealer(options: DealerSocketOptions): DealerSocket;
}
