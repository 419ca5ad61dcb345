/**
 * @module `kvgate bridge`: runs next to an engine, subscribes to its KV-event PUB socket and forwards every message
 * unchanged (sequence frame, topic, msgpack payload) to a router's /admin/kv-events over HTTP — for routers that
 * cannot open ZeroMQ sockets (Cloudflare Workers) or cannot reach the engine's ports.
 *
 * Gaps: the bridge forwards the engine's own sequence numbers, so the router's stream logic sees every gap and
 * restart exactly as with a direct subscription. With --replay the bridge also fills gaps before forwarding: on a
 * jump in the live sequence (ZeroMQ dropped messages at its high-water mark while the bridge was held back, or the
 * network blipped) it asks the engine's replay ROUTER for the missing batches and sends them first, in order; on
 * start it asks the router where the stream stands and replays from there. What replay cannot supply reaches the
 * router as a gap, which marks the worker cold. The sockets come from the runtime adapter's ZmqSockets (the native
 * `zeromq` module on Node, kvgate's ZMTP client on Bun and Deno).
 */
import { endpointForRank } from "../events/dp-endpoint.ts";
import { encodeSeq, plainFrames, readSeq } from "../events/zmq-frames.ts";
import { BridgeSender, type BridgeSenderOptions, type BridgeSenderStats } from "./bridge-sender.ts";
import { ZmqReplayClient } from "../zmq/zmq-replay-client.ts";
import type { SubSocket, ZmqSockets } from "../zmq/zmq-sockets.ts";

export interface BridgeOptions {
  /** The engine's KV-event PUB endpoint for dp rank 0 (offset by dpRank as vLLM does). */
  zmq: string;
  /** The engine's replay ROUTER endpoint for dp rank 0. */
  replay?: string;
  topic?: string;
  /** Bind instead of connect (when the engine connects to the bridge). */
  bind?: boolean;
  /** Messages ZeroMQ holds for the bridge while it is not reading. Default 10,000. */
  receiveHighWaterMark?: number;
  replayTimeoutMs?: number;
  /** The ZeroMQ implementation (the runtime adapter's). */
  sockets: ZmqSockets;
  sender: BridgeSenderOptions;
  log?: (line: string) => void;
}

export interface BridgeStats extends BridgeSenderStats {
  /** Messages read from the live socket. */
  received: number;
  /** Messages that were not [topic, 8-byte seq, payload]: not forwardable, skipped. */
  malformed: number;
  /** Jumps in the live sequence number. */
  gaps: number;
  /** Batches fetched from the replay socket and forwarded. */
  replayed: number;
  replayFailures: number;
  /** Batches known missing and not recovered by replay (the router sees them as a gap). */
  lost: number;
  /** Sequence numbers going back: the engine restarted. */
  restarts: number;
}

export class KvBridge {
  readonly sender: BridgeSender;
  readonly #stats = { received: 0, malformed: 0, gaps: 0, replayed: 0, replayFailures: 0, lost: 0, restarts: 0 };
  #sock: SubSocket | undefined;
  readonly #replay: ZmqReplayClient | undefined;
  readonly #endpoint: string;
  #last = -1;
  #routerLast = -1;
  #loop: Promise<void> | undefined;
  #stopping = false;
  /** The replay endpoint of this bridge's rank, when there is one. */
  readonly replayEndpoint: string | undefined;

  constructor(readonly options: BridgeOptions) {
    const rank = options.sender.dpRank ?? 0;
    this.#endpoint = endpointForRank(options.zmq, rank);
    this.replayEndpoint = options.replay ? endpointForRank(options.replay, rank) : undefined;
    this.#replay = this.replayEndpoint
      ? new ZmqReplayClient(this.replayEndpoint, { timeoutMs: options.replayTimeoutMs, sockets: options.sockets })
      : undefined;
    this.sender = new BridgeSender({ log: options.log, ...options.sender });
  }

  get stats(): BridgeStats {
    return { ...this.sender.stats, ...this.#stats };
  }

  /** The KV-event endpoint of this bridge's rank (the configured one offset by the rank). */
  get endpoint(): string {
    return this.#endpoint;
  }

  /** Learns the router's position, subscribes and starts forwarding; resolves once the socket is connected or bound. */
  async start(): Promise<void> {
    this.#routerLast = await this.sender.hello();
    if (this.#stopping) return;
    const sock = (this.#sock = this.options.sockets.subscriber({ receiveHighWaterMark: this.options.receiveHighWaterMark ?? 10_000, reconnectIntervalMs: 100, reconnectMaxIntervalMs: 5_000 }));
    sock.subscribe(this.options.topic ?? "");
    if (this.options.bind) await sock.bind(this.#endpoint);
    else sock.connect(this.#endpoint);
    this.#loop = this.#receive(sock);
  }

  /** Stops reading, forwards what is queued (up to `timeoutMs`), closes the sockets. */
  async stop(timeoutMs = 5_000): Promise<void> {
    this.#stopping = true;
    if (this.#sock && !this.#sock.closed) this.#sock.close();
    this.#replay?.close();
    // The receive loop may be waiting for room in a full queue (router down): closing the sender releases it.
    await Promise.race([this.#loop, new Promise((r) => setTimeout(r, 200))]);
    await this.sender.close(timeoutMs);
    await this.#loop;
  }

  async #receive(sock: SubSocket): Promise<void> {
    while (!sock.closed) {
      try {
        for await (const raw of sock) {
          this.#stats.received++;
          const frames = plainFrames(raw);
          const seq = frames.length === 3 ? readSeq(frames[1]) : -1;
          if (seq < 0) {
            this.#stats.malformed++;
            continue;
          }
          await this.#sequence(seq, frames[0]!);
          if (!(await this.sender.push({ topic: frames[0]!, seq: frames[1]!, payload: frames[2]! }))) return;
          this.#last = seq;
        }
      } catch (e) {
        if (sock.closed) return;
        this.options.log?.(`receive error on ${this.#endpoint}: ${(e as Error).message}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** Before forwarding live `seq`: fills what is missing since the last forwarded (or the router's last) batch. */
  async #sequence(seq: number, topic: Uint8Array): Promise<void> {
    if (this.#last < 0) {
      const next = this.#routerLast + 1;
      // Joining: the router already has [0, routerLast]. A live seq at or below it means the engine restarted meanwhile.
      if (seq > next) await this.#fill(next, seq, topic, false);
      else if (this.#routerLast >= 0 && seq <= this.#routerLast && seq > 0) await this.#fill(0, seq, topic, false);
      return;
    }
    if (seq > this.#last + 1) {
      this.#stats.gaps++;
      await this.#fill(this.#last + 1, seq, topic, true);
    } else if (seq <= this.#last) {
      this.#stats.restarts++;
      if (seq > 0) await this.#fill(0, seq, topic, false);
    }
  }

  /** Forwards batches [from, until) from the replay socket; what it cannot supply is counted lost when `counted`. */
  async #fill(from: number, until: number, topic: Uint8Array, counted: boolean): Promise<void> {
    let got = 0;
    if (this.#replay) {
      try {
        for await (const f of this.#replay.replay(from)) {
          if (f.seq >= until) break;
          if (f.seq < from) continue;
          if (!(await this.sender.push({ topic, seq: encodeSeq(f.seq), payload: f.payload }))) return;
          got++;
        }
      } catch (e) {
        this.#stats.replayFailures++;
        this.options.log?.(`replay from seq ${from} failed: ${(e as Error).message}`);
      }
      this.#stats.replayed += got;
    }
    if (counted) this.#stats.lost += until - from - got;
  }
}
