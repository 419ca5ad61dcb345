/**
 * @module The native `zeromq` module (libzmq 4.3) behind kvgate's socket interface: the Node default, where libzmq's
 * own I/O threads do the framing. Import it only where the native module loads (it aborts Bun 1.4.5; Deno needs
 * --allow-ffi), i.e. dynamically from the Node adapters.
 */
import { Dealer, Subscriber } from "zeromq";
import type { DealerSocket, DealerSocketOptions, SubSocket, SubSocketOptions, ZmqSockets } from "../../zmq/zmq-sockets.ts";

/** Messages received back to back before the loop lets the event loop run (zeromq's own limit is 512). */
const YIELD_EVERY = 512;
const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

const isEagain = (e: unknown): boolean => (e as { code?: string } | null)?.code === "EAGAIN";

/**
 * The SUB socket's messages. zeromq's own iterator asks libzmq whether a message is waiting before each receive
 * (ZMQ_EVENTS), which costs the router thread a poll(2) and a getpid(2) per message. With a receive timeout of 0
 * zeromq skips that question and receives at once; only when the queue is empty (EAGAIN) does this wait the usual
 * way (timeout -1: zeromq polls the socket's descriptor in libuv), then goes back. Every YIELD_EVERY messages it
 * yields to the event loop, as zeromq does, so a full queue cannot starve HTTP.
 */
class NativeMessages implements AsyncIterator<Uint8Array[], undefined> {
  #sinceYield = 0;

  constructor(readonly sock: Subscriber) {}

  async next(): Promise<IteratorResult<Uint8Array[], undefined>> {
    const sock = this.sock;
    if (sock.closed) return DONE;
    if (++this.#sinceYield >= YIELD_EVERY) {
      this.#sinceYield = 0;
      await new Promise((r) => setImmediate(r));
      if (sock.closed) return DONE;
    }
    try {
      return { value: await sock.receive(), done: false };
    } catch (e) {
      if (sock.closed) return DONE;
      if (!isEagain(e)) throw e;
    }
    // The queue is empty: wait for the next message.
    this.#sinceYield = 0;
    sock.receiveTimeout = -1;
    try {
      return { value: await sock.receive(), done: false };
    } catch (e) {
      if (sock.closed && isEagain(e)) return DONE;
      throw e;
    } finally {
      if (!sock.closed) sock.receiveTimeout = 0;
    }
  }
}

function subscriber(o: SubSocketOptions): SubSocket {
  const sock = new Subscriber({
    linger: 0,
    receiveTimeout: 0,
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
  return {
    get closed() {
      return sock.closed;
    },
    subscribe: (prefix) => sock.subscribe(prefix),
    connect: (endpoint) => sock.connect(endpoint),
    bind: (endpoint) => sock.bind(endpoint),
    close: () => {
      if (!sock.closed) sock.close();
    },
    [Symbol.asyncIterator]: () => new NativeMessages(sock),
  };
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
