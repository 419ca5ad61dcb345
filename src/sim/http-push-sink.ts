/**
 * @module Pushes the simulated engine's KV-event batches to a router over HTTP, in order, retried and bounded (the
 * receiver's contract: docs/kv-events.md#transports-into-the-streams).
 */
import type { KvCacheEvent } from "./kv-events.ts";
import { KvBatchSequencer, type EncodedKvBatch, type KvEventSink } from "./kv-event-sink.ts";
import type { KvEventEncoding } from "./kv-event-codec.ts";
import { realClock, type CancelTimer, type SimClock } from "./sim-clock.ts";

export interface HttpPushSinkOptions {
  /** Router endpoint that accepts the batches. */
  url: string;
  workerId: string;
  dpRank?: number;
  /** Sent as `authorization: Bearer <token>`. */
  token?: string;
  encoding?: KvEventEncoding;
  /** Longest time an event waits before its batch is sealed. Default 10 ms. */
  flushIntervalMs?: number;
  /** A batch is sealed as soon as it holds this many events. Default 512. */
  maxBatchEvents?: number;
  /** Sealed batches kept while the router is unreachable. Default 1,024. */
  maxQueueBatches?: number;
  /** First retry delay; doubles per failure up to 30× this. Default 100 ms. */
  retryDelayMs?: number;
  /** A POST not answered within this time counts as failed (and is retried). Default 5,000 ms. */
  requestTimeoutMs?: number;
  fetch?: typeof fetch;
  clock?: SimClock;
  /** Told about every failed send (network error or non-2xx status). */
  onError?: (error: Error, batch: EncodedKvBatch) => void;
}

export interface HttpPushStats {
  /** Batches the router accepted. */
  sent: number;
  sentEvents: number;
  /** Batches dropped because the queue was full (oldest first). */
  dropped: number;
  droppedEvents: number;
  /** Batches the router refused with a 4xx other than 408/429 (not retried). */
  rejected: number;
  /** Failed attempts (each retry counts). */
  failures: number;
  queued: number;
  nextSeq: number;
}

export class HttpPushSink implements KvEventSink {
  readonly #o: Required<Omit<HttpPushSinkOptions, "token" | "onError">> & Pick<HttpPushSinkOptions, "token" | "onError">;
  readonly #sequencer: KvBatchSequencer;
  readonly #queue: EncodedKvBatch[] = [];
  #pending: KvCacheEvent[] = [];
  #pendingTs = 0;
  #sealTimer: CancelTimer | undefined;
  #retryTimer: CancelTimer | undefined;
  #inFlight: Promise<void> | undefined;
  #backoff = 0;
  #closed = false;
  #waiters: (() => void)[] = [];
  readonly stats: HttpPushStats = { sent: 0, sentEvents: 0, dropped: 0, droppedEvents: 0, rejected: 0, failures: 0, queued: 0, nextSeq: 0 };

  constructor(options: HttpPushSinkOptions) {
    this.#o = {
      dpRank: 0, encoding: "array", flushIntervalMs: 10, maxBatchEvents: 512, maxQueueBatches: 1024, retryDelayMs: 100, requestTimeoutMs: 5000,
      // An option passed as undefined (startSimServer and `kvgate sim` forward theirs) must not erase a default: an
      // undefined flushIntervalMs made the seal timer NaN, so `kvgate sim --events-url` never sent a batch.
      ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)),
      workerId: options.workerId, url: options.url,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis), clock: options.clock ?? realClock(),
    };
    this.#sequencer = new KvBatchSequencer({ workerId: this.#o.workerId, dpRank: this.#o.dpRank, encoding: this.#o.encoding });
  }

  publish(events: readonly KvCacheEvent[], ts: number): void {
    if (events.length === 0) return;
    if (this.#closed) {
      this.stats.droppedEvents += events.length;
      return;
    }
    this.#pending.push(...events);
    this.#pendingTs = ts;
    if (this.#pending.length >= this.#o.maxBatchEvents) this.#seal();
    else this.#sealTimer ??= this.#o.clock.setTimer(this.#o.flushIntervalMs, () => this.#seal());
  }

  #seal(): void {
    this.#sealTimer?.();
    this.#sealTimer = undefined;
    if (this.#pending.length === 0) return;
    const batch = this.#sequencer.seal(this.#pending, this.#pendingTs);
    this.#pending = [];
    this.stats.nextSeq = this.#sequencer.nextSeq;
    this.#queue.push(batch);
    // Never drop the batch being sent (index 0 while in flight).
    while (this.#queue.length > this.#o.maxQueueBatches) {
      const [gone] = this.#queue.splice(this.#inFlight ? 1 : 0, 1);
      this.stats.dropped++;
      this.stats.droppedEvents += gone!.events;
    }
    this.stats.queued = this.#queue.length;
    this.#pump();
  }

  #pump(): void {
    if (this.#inFlight || this.#retryTimer || this.#queue.length === 0) {
      if (this.#queue.length === 0 && !this.#inFlight) this.#wake();
      return;
    }
    const batch = this.#queue[0]!;
    this.#inFlight = this.#send(batch).then((outcome) => {
      this.#inFlight = undefined;
      if (outcome === "retry") {
        const delay = Math.min(this.#o.retryDelayMs * 2 ** this.#backoff, this.#o.retryDelayMs * 30);
        this.#backoff++;
        this.#wake();
        this.#retryTimer = this.#o.clock.setTimer(delay, () => {
          this.#retryTimer = undefined;
          this.#pump();
        });
        return;
      }
      this.#backoff = 0;
      if (this.#queue[0] === batch) this.#queue.shift();
      this.stats.queued = this.#queue.length;
      this.#pump();
    });
  }

  async #send(batch: EncodedKvBatch): Promise<"done" | "retry"> {
    const headers: Record<string, string> = {
      "content-type": "application/msgpack",
      "x-kvgate-worker": batch.workerId,
      "x-kvgate-dp-rank": String(batch.dpRank),
      "x-kvgate-seq": String(batch.seq),
    };
    if (this.#o.token) headers.authorization = `Bearer ${this.#o.token}`;
    let error: Error;
    try {
      const signal = AbortSignal.timeout(this.#o.requestTimeoutMs);
      const res = await this.#o.fetch(this.#o.url, { method: "POST", headers, body: batch.bytes, signal });
      await res.body?.cancel();
      if (res.ok) {
        this.stats.sent++;
        this.stats.sentEvents += batch.events;
        return "done";
      }
      error = new Error(`KV event push to ${this.#o.url} answered ${res.status}`);
      if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
        this.stats.failures++;
        this.stats.rejected++;
        this.#o.onError?.(error, batch);
        return "done";
      }
    } catch (e) {
      error = e instanceof Error ? e : new Error(String(e));
    }
    this.stats.failures++;
    this.#o.onError?.(error, batch);
    return "retry";
  }

  #wake(): void {
    const w = this.#waiters;
    this.#waiters = [];
    for (const fn of w) fn();
  }

  /** Seals pending events and waits until the queue is empty or a send has failed; true when nothing is queued. */
  async flush(): Promise<boolean> {
    this.#seal();
    if (this.#queue.length === 0 && !this.#inFlight) return true;
    if (this.#retryTimer) {
      // Try now instead of waiting out the backoff.
      this.#retryTimer();
      this.#retryTimer = undefined;
      this.#pump();
    }
    await new Promise<void>((resolve) => this.#waiters.push(resolve));
    return this.#queue.length === 0;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await this.flush();
    this.#closed = true;
    this.#sealTimer?.();
    this.#retryTimer?.();
    this.#retryTimer = undefined;
    this.stats.dropped += this.#queue.length;
    this.stats.droppedEvents += this.#queue.reduce((n, b) => n + b.events, 0);
    this.#queue.length = 0;
    this.stats.queued = 0;
    await this.#inFlight;
  }
}
