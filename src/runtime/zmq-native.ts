/**
 * @module The native `zeromq` module (libzmq 4.3) behind kvgate's socket interface: the Node default, where libzmq's
 * own I/O threads do the framing. Import it only where the native module loads (it aborts Bun 1.4.5; Deno needs
 * --allow-ffi), i.e. dynamically from the Node adapters.
 */
import { Dealer, Subscriber } from "zeromq";
import type { DealerSocket, DealerSocketOptions, SubSocket, SubSocketOptions, ZmqSockets } from "./zmq-sockets.ts";

function subscriber(o: SubSocketOptions): SubSocket {
  const sock = new Subscriber({
    linger: 0,
    reconnectInterval: o.reconnectIntervalMs ?? 100,
    reconnectMaxInterval: o.reconnectMaxIntervalMs ?? 5_000,
    receiveHighWaterMark: o.receiveHighWaterMark ?? 100_000,
  });
  if (o.onConnect) {
    sock.events.on("connect", () => o.onConnect!());
    sock.events.on("accept", () => o.onConnect!());
  }
  if (o.onDisconnect) sock.events.on("disconnect", () => o.onDisconnect!());
  if (o.onError) sock.events.on("handshake:error:protocol", (e) => o.onError!(e.error));
  return sock;
}

function dealer(o: DealerSocketOptions): DealerSocket {
  const sock = new Dealer({ linger: 0, receiveTimeout: o.timeoutMs, sendTimeout: o.timeoutMs });
  return {
    get closed() {
      return sock.closed;
    },
    connect: (endpoint) => sock.connect(endpoint),
    send: (frames) => sock.send(frames),
    receive: () => sock.receive(),
    close: () => {
      if (!sock.closed) sock.close();
    },
  };
}

export const nativeSockets: ZmqSockets = { name: "zeromq", subscriber, dealer };
