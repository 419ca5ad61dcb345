/**
 * @module The HTTP half of `kvgate bridge`: a bounded queue of raw engine messages and one sender that POSTs them to
 * the router's /admin/kv-events in batches (flushed by count, bytes or time), one POST in flight so order holds,
 * retried with exponential backoff on network errors, 401/403/404/408/429 and 5xx. A POST keeps its number across
 * retries so the router applies it once even when an answer was lost. When the queue is full, push() waits: the
 * caller stops reading its socket and ZeroMQ's high-water mark bounds the rest (the publisher drops, the sequence
 * numbers show it). Web standards only (fetch, timers), so tests drive it without sockets.
 */
import { encodeKvFrames, frameSize, KV_FRAMES_CONTENT_TYPE, type KvFrame } from "../events/kv-frames.ts";

export interface BridgeSenderOptions {
  /** The router's ingest URL, e.g. http://router:8080/admin/kv-events. */
  url: string;
  token: string;
  worker: string;
  dpRank?: number;
  /** Frames per POST at most. Default 256. */
  maxBatchFrames?: number;
  /** Bytes per POST at most (a single larger frame goes alone). Default 1 MiB. */
  maxBatchBytes?: number;
  /** Longest a frame waits for others before its POST goes. Default 20 ms. */
  flushMs?: number;
  /** Frames queued at most; push() waits beyond. Default 10,000. */
  maxQueueFrames?: number;
  /** Bytes queued at most; push() waits beyond. Default 64 MiB. */
  maxQueueBytes?: number;
  /** First retry delay, doubled per failure up to retryMaxMs. Defaults 100 and 5,000 ms. */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** A POST unanswered this long counts as failed. Default 10,000 ms. */
  requestTimeoutMs?: number;
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
  /** This bridge run's id (x-kvgate-bridge); random by default. */
  session?: string;
  log?: (line: string) => void;
}

export interface BridgeSenderStats {
  queuedFrames: number;
  queuedBytes: number;
  /** Frames the router accepted. */
  sentFrames: number;
  posts: number;
  /** Failed POST attempts (each retry counts). */
  failures: number;
  /** Frames the router refused for good (400, 413, 422): dropped and counted, never retried. */
  rejectedFrames: number;
  /** Frames still queued when the bridge stopped. */
  abandonedFrames: number;
  /** Times push() had to wait for room (the router was slower than the engine). */
  backpressureWaits: number;
  /** The router's last applied sequence number, as its last answer said. */
  routerLastSeq: number;
  /** Gaps and cold marks the router reported. */
  routerGaps: number;
}

const RETRY_STATUS = new Set([401, 403, 404, 408, 409, 425, 429]);

export class BridgeSender {
  readonly stats: BridgeSenderStats = {
    queuedFrames: 0, queuedBytes: 0, sentFrames: 0, posts: 0, failures: 0, rejectedFrames: 0, abandonedFrames: 0, backpressureWaits: 0,
    routerLastSeq: -1, routerGaps: 0,
  };
  readonly #o: Required<Omit<BridgeSenderOptions, "dpRank" | "log">> & Pick<BridgeSenderOptions, "dpRank" | "log">;
  readonly #queue: { frame: KvFrame; bytes: number }[] = [];
  #post = 0;
  #closing = false;
  #stopped = false;
  #wakeSender: (() => void) | undefined;
  #room: (() => void)[] = [];
  #loop: Promise<void> | undefined;

  constructor(options: BridgeSenderOptions) {
    const rand = new Uint32Array(2);
    crypto.getRandomValues(rand);
    this.#o = {
      maxBatchFrames: 256, maxBatchBytes: 1 << 20, flushMs: 20, maxQueueFrames: 10_000, maxQueueBytes: 64 << 20, retryMinMs: 100,
      retryMaxMs: 5_000, requestTimeoutMs: 10_000, session: `${rand[0]!.toString(16)}${rand[1]!.toString(16)}`,
      // An option passed as undefined (the CLI forwards unset flags) must not erase its default.
      ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as BridgeSenderOptions,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
      sleep: options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms))),
    };
  }

  /**
   * Asks the router where this stream stands (an empty POST): its last applied sequence number, -1 when it has
   * none. Retries until it answers or the sender is closed (then -1).
   */
  async hello(): Promise<number> {
    for (let attempt = 0; !this.#closing; attempt++) {
      const r = await this.#send([], attempt);
      if (r === "ok") return this.stats.routerLastSeq;
      if (r === "rejected") return -1;
      await this.#o.sleep(this.#backoff(attempt));
    }
    return -1;
  }

  /** Queues one message; waits while the queue is full. False once the sender is closing (the frame is not taken). */
  async push(frame: KvFrame): Promise<boolean> {
    const bytes = frameSize(frame);
    let waited = false;
    while (!this.#closing && this.#queue.length > 0 &&
      (this.#queue.length >= this.#o.maxQueueFrames || this.stats.queuedBytes + bytes > this.#o.maxQueueBytes)) {
      if (!waited) this.stats.backpressureWaits++;
      waited = true;
      await new Promise<void>((r) => this.#room.push(r));
    }
    if (this.#closing) return false;
    this.#queue.push({ frame, bytes });
    this.stats.queuedFrames++;
    this.stats.queuedBytes += bytes;
    this.#loop ??= this.#run();
    this.#wakeSender?.();
    return true;
  }

  /** Sends what is queued (trying until `timeoutMs` passes), then stops; frames left are counted abandoned. */
  async close(timeoutMs = 5_000): Promise<void> {
    this.#closing = true;
    for (const r of this.#room.splice(0)) r();
    this.#wakeSender?.();
    const deadline = Date.now() + timeoutMs;
    // A real timer, not the injected sleep: this waits for the sender's own progress.
    while (this.#queue.length > 0 && Date.now() < deadline && this.#loop) await new Promise((r) => setTimeout(r, 5));
    this.#stopped = true;
    this.#wakeSender?.();
    await this.#loop;
    this.stats.abandonedFrames += this.#queue.length;
    this.#queue.length = 0;
    this.stats.queuedFrames = 0;
    this.stats.queuedBytes = 0;
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      if (this.#queue.length === 0) {
        if (this.#closing) return;
        await new Promise<void>((r) => (this.#wakeSender = r));
        this.#wakeSender = undefined;
        continue;
      }
      // Let a batch fill for up to flushMs unless it is already full (or the bridge is shutting down).
      if (!this.#closing && !this.#batchFull()) await this.#o.sleep(this.#o.flushMs);
      const n = this.#batchLength();
      const frames = this.#queue.slice(0, n).map((q) => q.frame);
      this.#post++;
      for (let attempt = 0; !this.#stopped; attempt++) {
        const r = await this.#send(frames, attempt);
        if (r !== "retry") {
          if (r === "rejected") this.stats.rejectedFrames += n;
          else this.stats.sentFrames += n;
          this.#take(n);
          break;
        }
        await this.#o.sleep(this.#backoff(attempt));
      }
    }
  }

  #batchFull(): boolean {
    return this.#queue.length >= this.#o.maxBatchFrames || this.stats.queuedBytes >= this.#o.maxBatchBytes;
  }

  #batchLength(): number {
    let n = 0, bytes = 0;
    for (const q of this.#queue) {
      if (n >= this.#o.maxBatchFrames || (n > 0 && bytes + q.bytes > this.#o.maxBatchBytes)) break;
      n++;
      bytes += q.bytes;
    }
    return n;
  }

  #take(n: number): void {
    for (const q of this.#queue.splice(0, n)) {
      this.stats.queuedFrames--;
      this.stats.queuedBytes -= q.bytes;
    }
    for (const r of this.#room.splice(0)) r();
  }

  #backoff(attempt: number): number {
    return Math.min(this.#o.retryMaxMs, this.#o.retryMinMs * 2 ** Math.min(attempt, 20));
  }

  async #send(frames: KvFrame[], attempt: number): Promise<"ok" | "retry" | "rejected"> {
    const headers: Record<string, string> = {
      "content-type": KV_FRAMES_CONTENT_TYPE, authorization: `Bearer ${this.#o.token}`, "x-kvgate-worker": this.#o.worker,
      "x-kvgate-bridge": this.#o.session, "x-kvgate-post": String(this.#post),
    };
    if (this.#o.dpRank !== undefined) headers["x-kvgate-dp-rank"] = String(this.#o.dpRank);
    this.stats.posts++;
    let res: Response;
    try {
      res = await this.#o.fetch(this.#o.url, { method: "POST", headers, body: encodeKvFrames(frames), signal: AbortSignal.timeout(this.#o.requestTimeoutMs) });
    } catch (e) {
      this.stats.failures++;
      if (attempt === 0) this.#o.log?.(`POST ${this.#o.url} failed (${(e as Error).message}); retrying with backoff`);
      return "retry";
    }
    const text = await res.text().catch(() => "");
    if (res.ok) {
      try {
        const body = JSON.parse(text) as { last_seq?: unknown; gap?: unknown };
        if (typeof body.last_seq === "number") this.stats.routerLastSeq = body.last_seq;
        if (typeof body.gap === "number") this.stats.routerGaps += body.gap;
      } catch {
        // an answer without a body is still an acceptance
      }
      return "ok";
    }
    this.stats.failures++;
    const why = `${res.status} ${text.slice(0, 200)}`;
    if (res.status >= 500 || RETRY_STATUS.has(res.status)) {
      if (attempt === 0) this.#o.log?.(`the router answered ${why}; retrying with backoff`);
      return "retry";
    }
    this.#o.log?.(`the router refused ${frames.length} frame(s): ${why}; dropped`);
    return "rejected";
  }
}
