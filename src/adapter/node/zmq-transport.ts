/**
 * @module The gateway's ZeroMQ transport on Node: tcp:// endpoints over kvgate's ZMTP client, which decodes engine
 * batches in place in a shared read buffer (faster than the native module, which builds a buffer per frame; `npm run
 * bench -- events`), and ipc:// or inproc:// over the native `zeromq` module, loaded only when one is configured.
 */
import type { KvEventHub } from "../../events/kv-event-hub.ts";
import { ZmqKvEventSubscriber, type ZmqSubscriberOptions } from "../../zmq/kv-event-subscriber.ts";
import type { ZmqSockets } from "../../zmq/zmq-sockets.ts";
import { engineZmtpSockets } from "../../zmq/zmtp-sockets.ts";
import { nodeTcpDialer } from "./tcp-dialer.ts";

/** The native `zeromq` module, loaded on first use (importing it aborts Bun; Deno needs --allow-ffi). */
export async function loadNativeSockets(): Promise<ZmqSockets> {
  return (await import("./zmq-native.ts")).nativeSockets;
}

export async function nodeTransport(hub: KvEventHub, log?: (line: string) => void,
  options: Omit<ZmqSubscriberOptions, "hub" | "log" | "sockets"> = {}): Promise<ZmqKvEventSubscriber> {
  const zmtp = engineZmtpSockets(nodeTcpDialer);
  return new ZmqKvEventSubscriber(hub.index, { ...options, hub, log, sockets: (ep) => (ep.startsWith("tcp://") ? zmtp : loadNativeSockets()) });
}
