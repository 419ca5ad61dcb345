/**
 * @module Raw TCP peers for the ZMTP tests: a loopback server whose bytes the test writes by hand (independently of
 * src/zmq/zmtp-codec.ts), to play a well-behaved publisher that does not filter, or a broken or hostile one.
 */
import { createServer, type Server, type Socket } from "node:net";

export interface RawPeer {
  endpoint: string;
  port: number;
  /** Every accepted connection, in order. */
  readonly sockets: Socket[];
  /** Bytes received per connection. */
  received(i: number): Buffer;
  close(): Promise<void>;
}

/** Listens on a loopback port and calls `onConnection` for each client. */
export async function rawPeer(onConnection: (sock: Socket, index: number) => void, port = 0): Promise<RawPeer> {
  const sockets: Socket[] = [];
  const data: Buffer[][] = [];
  const server: Server = createServer((sock) => {
    const i = sockets.push(sock) - 1;
    data.push([]);
    sock.on("data", (b: Buffer) => data[i]!.push(b));
    sock.on("error", () => {});
    onConnection(sock, i);
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const actual = (server.address() as { port: number }).port;
  return {
    endpoint: `tcp://127.0.0.1:${actual}`,
    port: actual,
    sockets,
    received: (i) => Buffer.concat(data[i] ?? []),
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** A ZMTP 3.x greeting written out byte by byte. */
export function greeting(opts: { major?: number; minor?: number; mechanism?: string } = {}): Buffer {
  const g = Buffer.alloc(64);
  g[0] = 0xff;
  g[9] = 0x7f;
  g[10] = opts.major ?? 3;
  g[11] = opts.minor ?? 1;
  g.write(opts.mechanism ?? "NULL", 12, "latin1");
  return g;
}

/** One frame: flags, 1-byte or 8-byte size, body. `long` forces the 8-byte size. */
export function frame(body: Buffer | string, flags: { more?: boolean; command?: boolean; long?: boolean } = {}): Buffer {
  const b = typeof body === "string" ? Buffer.from(body, "latin1") : body;
  const long = flags.long || b.length > 255;
  const f = (flags.more ? 1 : 0) | (long ? 2 : 0) | (flags.command ? 4 : 0);
  const head = long ? Buffer.alloc(9) : Buffer.alloc(2);
  head[0] = f;
  if (long) head.writeBigUInt64BE(BigInt(b.length), 1);
  else head[1] = b.length;
  return Buffer.concat([head, b]);
}

export function command(name: string, data: Buffer = Buffer.alloc(0)): Buffer {
  return frame(Buffer.concat([Buffer.from([name.length]), Buffer.from(name, "latin1"), data]), { command: true });
}

export function ready(socketType: string): Buffer {
  const name = Buffer.from("Socket-Type", "latin1");
  const value = Buffer.from(socketType, "latin1");
  const size = Buffer.alloc(4);
  size.writeUInt32BE(value.length);
  return command("READY", Buffer.concat([Buffer.from([name.length]), name, size, value]));
}

/** A multipart message. */
export function message(parts: (Buffer | string)[]): Buffer {
  return Buffer.concat(parts.map((p, i) => frame(p, { more: i < parts.length - 1 })));
}

/** Greeting and READY of a publisher that sends everything it is given, matching subscriptions or not. */
export function actAsPublisher(sock: Socket, type = "PUB"): void {
  sock.write(Buffer.concat([greeting(), ready(type)]));
}

/** Resolves once `cond` holds, polling on the event loop; the test's timeout bounds it. */
export async function eventually(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; !cond(); i++) {
    if (i > 10_000) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}
