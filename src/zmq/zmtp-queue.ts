/**
 * @module The receive queue of a ZMTP socket: complete messages waiting for the application, bounded by a count and a
 * byte high-water mark. A push that fills it tells the connection to stop reading; once the application has taken
 * it down to half, reading resumes (hysteresis, so a busy consumer does not toggle the sockets per message).
 */
import { KvgateError } from "../core/errors.ts";

interface Waiter {
  resolve(frames: Uint8Array[]): void;
  reject(e: Error): void;
  timer?: ReturnType<typeof setTimeout>;
}

export class ReceiveQueue {
  #items: Uint8Array[][] = [];
  #head = 0;
  #bytes = 0;
  #paused = false;
  #closed: Error | undefined;
  readonly #waiters: Waiter[] = [];

  constructor(readonly highWaterMark: number, readonly highWaterBytes: number, private readonly onRoom: () => void) {}

  get length(): number {
    return this.#items.length - this.#head;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** Queues a message (always: it is already decoded); false when the queue is now full and reading must stop. */
  push(frames: Uint8Array[]): boolean {
    if (this.#closed) return false;
    const w = this.#waiters.shift();
    if (w) {
      clearTimeout(w.timer);
      w.resolve(frames);
      return true;
    }
    this.#items.push(frames);
    this.#bytes += size(frames);
    if (this.length >= this.highWaterMark || this.#bytes >= this.highWaterBytes) this.#paused = true;
    return !this.#paused;
  }

  /** The next message; waits (up to `timeoutMs`) when empty; rejects once closed. */
  shift(timeoutMs?: number): Promise<Uint8Array[]> {
    if (this.length > 0) return Promise.resolve(this.#take());
    if (this.#closed) return Promise.reject(this.#closed);
    return new Promise((resolve, reject) => {
      const w: Waiter = { resolve, reject };
      if (timeoutMs !== undefined) {
        w.timer = setTimeout(() => {
          const i = this.#waiters.indexOf(w);
          if (i >= 0) this.#waiters.splice(i, 1);
          reject(new KvgateError("KVGATE_ERR_UPSTREAM_TIMEOUT", `no ZeroMQ message within ${timeoutMs} ms`));
        }, timeoutMs);
      }
      this.#waiters.push(w);
    });
  }

  /** The next message if one is queued (no waiting). */
  takeNow(): Uint8Array[] | undefined {
    return this.length > 0 ? this.#take() : undefined;
  }

  /** Drops what is queued and rejects every waiter (and later shifts) with `error`. */
  close(error: Error): void {
    this.#closed = error;
    this.#items = [];
    this.#head = 0;
    this.#bytes = 0;
    for (const w of this.#waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(error);
    }
  }

  #take(): Uint8Array[] {
    const frames = this.#items[this.#head]!;
    this.#items[this.#head++] = EMPTY;
    this.#bytes -= size(frames);
    // Compact now and then instead of shift() per message (O(n) on a long queue).
    if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    if (this.#paused && this.length <= this.highWaterMark / 2 && this.#bytes <= this.highWaterBytes / 2) {
      this.#paused = false;
      // After the caller has its message: resuming may decode (and queue) more at once.
      queueMicrotask(this.onRoom);
    }
    return frames;
  }
}

const EMPTY: Uint8Array[] = [];

function size(frames: Uint8Array[]): number {
  let n = 0;
  for (const f of frames) n += f.length;
  return n;
}
