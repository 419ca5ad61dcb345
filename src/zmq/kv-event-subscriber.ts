/**
 * @module Subscribes to engines' KV events over ZeroMQ: one SUB socket per (worker, dp rank) endpoint, reconnecting
 * by itself, each feeding a KvEventStream of the shared hub, with a DEALER replay client per endpoint when the
 * engine has a replay socket. The sockets come from the runtime adapter: kvgate's ZMTP client (zmtp-sockets.ts;
 * TCP on every runtime) or the native `zeromq` module (Node: ipc:// endpoints). Decoding and ordering are src/events.
 */
import { KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import { endpointForRank } from "../events/dp-endpoint.ts";
import { KvEventHub, type IngestTotals, type StreamStatus } from "../events/kv-event-hub.ts";
import type { KvEventStream, KvEventStreamOptions } from "../events/kv-event-stream.ts";
import type { KvEventTransportFactory, ZmqConnectionCounters } from "../events/kv-event-transport.ts";
import { ZmqReplayClient } from "./zmq-replay-client.ts";
import type { TcpDialer } from "./tcp-dialer.ts";
import type { SubSocket, ZmqSockets } from "./zmq-sockets.ts";
import { engineZmtpSockets } from "./zmtp-sockets.ts";

export interface EngineEventEndpoint extends Omit<KvEventStreamOptions, "dpRank" | "replay"> {
  /** The engine's KV-event PUB endpoint for rank 0 as this process reaches it, e.g. `tcp://10.0.0.5:5557`. */
  endpoint: string;
  /** The engine's replay ROUTER endpoint for rank 0 (vLLM `replay_endpoint`), if it has one. */
  replayEndpoint?: string;
  /** Data-parallel ranks: a count (ranks 0…n−1) or the list. Rank r listens on port + r. Default 1. */
  dpRanks?: number | readonly number[];
  /** Topic prefix subscribed to (vLLM `topic`). Default "" (every message). */
  topic?: string;
  /** Bind the endpoint instead of connecting (when the engine is configured to connect to kvgate). */
  bind?: boolean;
}

export interface ZmqSubscriberOptions {
  /** Shared with other transports (e.g. an HTTP bridge); created for `index` when absent. */
  hub?: KvEventHub;
  /** Ingest defaults for every worker (tier weights, kvGroup, …). */
  defaults?: Partial<KvEventStreamOptions>;
  replayTimeoutMs?: number;
  /** ZeroMQ reconnect backoff. Defaults 100 ms, doubling up to 5,000 ms. */
  reconnectIntervalMs?: number;
  reconnectMaxIntervalMs?: number;
  /** Messages queued per socket before it stops reading (vLLM's publisher uses 100,000). */
  receiveHighWaterMark?: number;
  /** The runtime adapter's ZeroMQ implementation, or one chosen per endpoint (e.g. ZMTP for tcp://, native for ipc://). */
  sockets: ZmqSockets | ((endpoint: string) => ZmqSockets | Promise<ZmqSockets>);
  /** Warnings: a connection closed because the engine side broke the protocol (one line each, bounded by the backoff). */
  log?: (line: string) => void;
}

/**
 * The connection counters the gateway reads (ZmqConnectionCounters): socketErrors are receive loops that ended with an
 * error other than the socket being closed, protocolErrors connections closed because the engine side broke the
 * protocol (each logged in lastError, then reconnected).
 */
export interface TransportCounters extends ZmqConnectionCounters {
  lastError?: string;
}

interface Attached {
  worker: string;
  /** Which ZeroMQ implementation each rank's socket uses. */
  clients: ZmqSockets["name"][];
  sockets: SubSocket[];
  replays: ZmqReplayClient[];
  loops: Promise<void>[];
}

export class ZmqKvEventSubscriber {
  readonly hub: KvEventHub;
  readonly transport: TransportCounters = { connects: 0, disconnects: 0, socketErrors: 0, protocolErrors: 0 };
  readonly #workers = new Map<string, Attached>();

  constructor(readonly index: KvIndex, readonly options: ZmqSubscriberOptions) {
    this.hub = options.hub ?? new KvEventHub(index, options.defaults);
  }

  /** Starts receiving a worker's events on each of its ranks; returns the streams (rank order). */
  async attach(ep: EngineEventEndpoint): Promise<KvEventStream[]> {
    if (this.#workers.has(ep.worker)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `worker ${ep.worker} is already attached`);
    const ranks = typeof ep.dpRanks === "number" ? Array.from({ length: ep.dpRanks }, (_, i) => i) : [...(ep.dpRanks ?? [0])];
    const a: Attached = { worker: ep.worker, clients: [], sockets: [], replays: [], loops: [] };
    this.#workers.set(ep.worker, a);
    const streams: KvEventStream[] = [];
    try {
      for (const rank of ranks) {
        const replayUrl = ep.replayEndpoint === undefined ? undefined : endpointForRank(ep.replayEndpoint, rank);
        const replay = replayUrl
          ? new ZmqReplayClient(replayUrl, { timeoutMs: this.options.replayTimeoutMs, sockets: await this.#sockets(replayUrl) })
          : undefined;
        if (replay) a.replays.push(replay);
        const { endpoint: _e, replayEndpoint: _r, dpRanks: _d, topic: _t, bind: _b, ...streamOpts } = ep;
        const stream = this.hub.open({ ...streamOpts, dpRank: rank, replay });
        streams.push(stream);
        const url = endpointForRank(ep.endpoint, rank);
        const impl = await this.#sockets(url);
        const sock = this.#socket(impl, `${ep.worker} rank ${rank} (${url})`);
        a.clients.push(impl.name);
        a.sockets.push(sock);
        sock.subscribe(ep.topic ?? "");
        if (ep.bind) await sock.bind(url);
        else sock.connect(url);
        a.loops.push(this.#receive(sock, stream));
      }
    } catch (e) {
      await this.detach(ep.worker);
      throw e;
    }
    return streams;
  }

  /** The ZeroMQ implementation of each of a worker's rank sockets (rank order); empty when not attached. */
  clientsOf(worker: string): ZmqSockets["name"][] {
    return [...(this.#workers.get(worker)?.clients ?? [])];
  }

  /** Stops a worker's sockets and streams; its index entries go too unless `keepEntries`. */
  async detach(worker: string, opts: { keepEntries?: boolean } = {}): Promise<void> {
    const a = this.#workers.get(worker);
    if (!a) return;
    this.#workers.delete(worker);
    for (const r of a.replays) r.close();
    for (const s of a.sockets) if (!s.closed) s.close();
    await Promise.allSettled(a.loops);
    this.hub.close(worker, opts);
  }

  async close(opts: { keepEntries?: boolean } = {}): Promise<void> {
    for (const w of [...this.#workers.keys()]) await this.detach(w, opts);
  }

  /** Ingest totals (see IngestCounters) plus socket connects, disconnects and errors. */
  counters(): IngestTotals & TransportCounters {
    return { ...this.hub.counters(), ...this.transport };
  }

  status(): StreamStatus[] {
    return this.hub.status();
  }

  /** Resolves once no stream has a replay in flight. */
  async settled(): Promise<void> {
    for (const s of this.hub.streams()) await s.settled();
  }

  async #sockets(endpoint: string): Promise<ZmqSockets> {
    const s = this.options.sockets;
    return typeof s === "function" ? s(endpoint) : s;
  }

  #socket(sockets: ZmqSockets, what: string): SubSocket {
    const o = this.options, t = this.transport;
    return sockets.subscriber({
      reconnectIntervalMs: o.reconnectIntervalMs,
      reconnectMaxIntervalMs: o.reconnectMaxIntervalMs,
      receiveHighWaterMark: o.receiveHighWaterMark ?? 100_000,
      onConnect: () => void t.connects++,
      onDisconnect: () => void t.disconnects++,
      onError: (e) => {
        t.protocolErrors++;
        t.lastError = `${what}: ${e.message}`;
        o.log?.(`KV events of ${t.lastError}; reconnecting`);
      },
    });
  }

  /** Feeds every message to the stream until the socket is closed; an unexpected receive error restarts the loop. */
  async #receive(sock: SubSocket, stream: KvEventStream): Promise<void> {
    // The stream takes in a message before it returns (it keeps no frame), so it can read them in place.
    if (sock.listen) return sock.listen((frames) => stream.onMessage(frames));
    while (!sock.closed) {
      try {
        for await (const frames of sock) stream.onMessage(frames);
      } catch {
        if (sock.closed) return;
        this.transport.socketErrors++;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
}

/** The gateway's ZeroMQ transport over kvgate's ZMTP client (TCP endpoints), on the runtime's TCP. */
export function zmtpTransport(dialer: TcpDialer): KvEventTransportFactory {
  return async (hub, log) => new ZmqKvEventSubscriber(hub.index, { hub, log, sockets: engineZmtpSockets(dialer) });
}
