/**
 * @module The TCP the ZMTP client needs, as an interface: src/zmq/ stays free of runtime modules, and each runtime
 * adapter supplies the sockets (src/adapter/node/tcp-dialer.ts, over node:net on Node, Bun and Deno).
 */

/** One TCP connection: the subset of a node:net Socket the ZMTP session uses. */
export interface TcpStream {
  /** True until the TCP connect completes. */
  readonly connecting: boolean;
  /** Bytes written but not yet handed to the kernel. */
  readonly writableLength: number;
  setNoDelay(noDelay: boolean): unknown;
  write(bytes: Uint8Array): unknown;
  /** Stop / restart delivering reads (backpressure to the peer through TCP). */
  pause(): unknown;
  resume(): unknown;
  destroy(error?: Error): unknown;
  /** "data" is not emitted for reads that go to the dialer's `onRead`. */
  on(event: "data", listener: (chunk: Uint8Array) => void): unknown;
  on(event: "error", listener: (error: Error) => void): unknown;
  on(event: "close", listener: () => void): unknown;
}

/**
 * Reads into a caller's buffer instead of a fresh chunk per read: `onRead(n, buffer)` gets each read's length and
 * returns false to stop reading (resume() restarts it).
 */
export interface ReadInto {
  buffer: Uint8Array;
  onRead(n: number, buffer: Uint8Array): boolean;
}

export interface TcpListener {
  /** The bound port (the real one after binding port 0). */
  readonly port: number;
  close(): void;
}

export interface TcpDialer {
  /** Starts connecting; failures arrive as "error" then "close" on the stream. A connection to itself is refused. */
  connect(host: string, port: number, readInto?: ReadInto): TcpStream;
  /** Listens; every accepted connection goes to `onConnection`. `onError` gets errors after listening started. */
  listen(host: string, port: number, onConnection: (stream: TcpStream) => void, onError: (error: Error) => void): Promise<TcpListener>;
}
