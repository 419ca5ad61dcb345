/**
 * @module The ZMTP client's TCP over node:net. Bun and Deno implement node:net too, so their adapters use this one
 * as well (the native `zeromq` module aborts Bun and needs --allow-ffi on Deno).
 */
import { connect, createServer, type Socket } from "node:net";
import type { ReadInto, TcpDialer, TcpListener, TcpStream } from "../../zmq/tcp-dialer.ts";

function dial(host: string, port: number, readInto?: ReadInto): TcpStream {
  const sock: Socket = readInto
    ? connect({ host, port, onread: { buffer: readInto.buffer, callback: (n: number, buf: Uint8Array) => readInto.onRead(n, buf) } })
    : connect({ host, port });
  // Dialling a free loopback port can connect the socket to itself (TCP simultaneous open, when the kernel picks
  // that very port as the source): it would hold the port the publisher is about to bind. Drop it; the caller redials.
  sock.once("connect", () => {
    if (sock.localPort === sock.remotePort && sock.localAddress === sock.remoteAddress) sock.destroy(new Error("TCP connection to itself"));
  });
  return sock;
}

async function listen(host: string, port: number, onConnection: (s: TcpStream) => void, onError: (e: Error) => void): Promise<TcpListener> {
  const server = createServer((sock) => onConnection(sock));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  server.on("error", onError);
  const addr = server.address();
  return { port: typeof addr === "object" && addr ? addr.port : port, close: () => void server.close() };
}

export const nodeTcpDialer: TcpDialer = { connect: dial, listen };
