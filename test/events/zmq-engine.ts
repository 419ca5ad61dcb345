/**
 * @module A stand-in for a vLLM engine's KV-event sockets on loopback: a publisher (XPUB, so the test knows when the
 * subscription reached it instead of sleeping) and a replay ROUTER answering `[id, b"", seq]` requests from its
 * buffer the way vLLM does, with switches for the failure modes the subscriber must survive.
 */
import { Router, XPublisher } from "zeromq";
import { encodeSeq, readSeq } from "../../src/events/zmq-frames.ts";

export type ReplayMode =
  /** Every buffered batch from the requested seq on, then END. */
  | "normal"
  /** Only END (the engine has nothing, or refuses). */
  | "refuse"
  /** Never answers (the subscriber's timeout must fire). */
  | "silent";

const END = new Uint8Array(8).fill(0xff);

export class TestEngine {
  readonly buffer = new Map<number, Uint8Array>();
  replayMode: ReplayMode = "normal";
  /** Replies carry the topic frame (vLLM ≥ 0.26, PR #45177) or not. */
  replayWithTopic = true;
  /** The oldest seq still buffered (older ones "fell out" of vLLM's buffer_steps ring). */
  oldestBuffered = 0;
  readonly requests: number[] = [];
  #subscribed = 0;
  #serving: Promise<void> | undefined;
  #watching: Promise<void> | undefined;

  private constructor(readonly pub: XPublisher, readonly router: Router | undefined, readonly topic: string) {}

  static async start(opts: { replay?: boolean; topic?: string; endpoint?: string } = {}): Promise<TestEngine> {
    const pub = new XPublisher({ sendHighWaterMark: 1_000_000, linger: 0 });
    try {
      await pub.bind(opts.endpoint ?? "tcp://127.0.0.1:*");
    } catch (e) {
      pub.close();
      throw e;
    }
    let router: Router | undefined;
    if (opts.replay) {
      router = new Router({ linger: 0, sendHighWaterMark: 1_000_000 });
      await router.bind("tcp://127.0.0.1:*");
    }
    const e = new TestEngine(pub, router, opts.topic ?? "");
    e.#watching = e.#watch();
    if (router) e.#serving = e.#serve(router);
    return e;
  }

  /** Two engines on adjacent ports (data-parallel ranks 0 and 1 of one server), retrying until a free pair is found. */
  static async startRanks(): Promise<[TestEngine, TestEngine]> {
    for (let attempt = 0; ; attempt++) {
      const e0 = await TestEngine.start();
      const port = Number(/:(\d+)$/.exec(e0.endpoint)![1]);
      try {
        return [e0, await TestEngine.start({ endpoint: `tcp://127.0.0.1:${port + 1}` })];
      } catch (e) {
        await e0.close();
        if (attempt >= 20) throw e;
      }
    }
  }

  get endpoint(): string {
    return this.pub.lastEndpoint!;
  }

  get replayEndpoint(): string | undefined {
    return this.router?.lastEndpoint ?? undefined;
  }

  /** Resolves once `n` subscriptions reached the publisher (so nothing published after is lost). */
  async subscribed(n = 1): Promise<void> {
    while (this.#subscribed < n) await new Promise((r) => setTimeout(r, 2));
  }

  /** Buffers the batch for replay and, unless `lose`, publishes it. */
  async publish(seq: number, payload: Uint8Array, opts: { lose?: boolean } = {}): Promise<void> {
    this.buffer.set(seq, payload);
    if (!opts.lose) await this.pub.send([this.topic, encodeSeq(seq), payload]);
  }

  /** Raw frames, for malformed messages. */
  async sendRaw(frames: Uint8Array[]): Promise<void> {
    await this.pub.send(frames);
  }

  async close(): Promise<void> {
    this.pub.close();
    this.router?.close();
    await Promise.allSettled([this.#serving, this.#watching]);
  }

  async #watch(): Promise<void> {
    try {
      for await (const [msg] of this.pub) if (msg && msg[0] === 1) this.#subscribed++;
    } catch {
      // closed
    }
  }

  async #serve(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        const [id, , seqFrame] = frames;
        if (frames.length !== 3 || !id) continue;
        const from = readSeq(seqFrame);
        this.requests.push(from);
        if (this.replayMode === "silent") continue;
        if (this.replayMode === "normal") {
          const seqs = [...this.buffer.keys()].filter((s) => s >= Math.max(from, this.oldestBuffered)).sort((a, b) => a - b);
          for (const s of seqs) {
            const body = [encodeSeq(s), this.buffer.get(s)!];
            await router.send(this.replayWithTopic ? [id, "", this.topic, ...body] : [id, "", ...body]);
          }
        }
        await router.send(this.replayWithTopic ? [id, "", this.topic, END, ""] : [id, "", END, ""]);
      }
    } catch {
      // closed
    }
  }
}
