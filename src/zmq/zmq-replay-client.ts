/**
 * @module Asks an engine's replay socket (a ZeroMQ ROUTER) for the KV-event batches after a gap, over a DEALER:
 * a REQ socket would take only one reply per request, and replays are many. A fresh DEALER per replay means a
 * reply to an abandoned request can never be read as the answer to the next one. The DEALER comes from the caller's
 * ZmqSockets implementation (the gateway's: kvgate's ZMTP client for tcp://).
 */
import { KvgateError } from "../core/errors.ts";
import type { ReplaySource } from "../events/kv-event-stream.ts";
import { parseReplayReply, plainFrames, replayRequest, type SeqFrame } from "../events/zmq-frames.ts";
import type { DealerSocket, ZmqSockets } from "./zmq-sockets.ts";

export interface ZmqReplayOptions {
  /** Longest wait for the next reply frame (and for the request to be sent) before the replay counts as failed. Default 5,000 ms. */
  timeoutMs?: number;
  /** The ZeroMQ implementation (the runtime adapter's). */
  sockets: ZmqSockets;
}

export class ZmqReplayClient implements ReplaySource {
  readonly #open = new Set<DealerSocket>();
  #closed = false;

  constructor(readonly endpoint: string, readonly options: ZmqReplayOptions) {}

  async *replay(fromSeq: number): AsyncGenerator<SeqFrame> {
    if (this.#closed) throw new KvgateError("KVGATE_ERR_STATE", "replay client closed");
    const timeout = this.options.timeoutMs ?? 5_000;
    const dealer = this.options.sockets.dealer({ timeoutMs: timeout });
    this.#open.add(dealer);
    try {
      dealer.connect(this.endpoint);
      try {
        await dealer.send(replayRequest(fromSeq));
      } catch (e) {
        throw new KvgateError("KVGATE_ERR_STATE", `replay request to ${this.endpoint}: ${(e as Error).message}`, undefined, { cause: e });
      }
      for (;;) {
        let frames: Uint8Array[];
        try {
          frames = await dealer.receive();
        } catch (e) {
          throw new KvgateError("KVGATE_ERR_STATE", `replay from ${this.endpoint}: ${(e as Error).message}`, undefined, { cause: e });
        }
        const r = parseReplayReply(plainFrames(frames));
        if (r === "end") return;
        if (r === null) throw new KvgateError("KVGATE_ERR_CORRUPT_EVENT", `malformed replay reply (${frames.length} frames)`);
        yield r;
      }
    } finally {
      this.#open.delete(dealer);
      dealer.close();
    }
  }

  /** Aborts replays in flight (their receive rejects) and refuses new ones. */
  close(): void {
    this.#closed = true;
    for (const d of this.#open) d.close();
    this.#open.clear();
  }
}
