/**
 * @module The router queue: parks requests while the fleet is saturated and admits them in policy order as load drains.
 * Admission itself (selection + booking) runs inside drain() synchronously, so each admitted request's booking is
 * visible to the next admissibility check — no over-admission between two awaits.
 */
import { KvgateError } from "../core/errors.ts";
import type { NowFn } from "./clock.ts";
import { queueKey } from "./queue-policy.ts";
import type { QueuePolicy } from "./router-config.ts";
import type { QueueRejection } from "./routing-types.ts";

export type StepResult<R> = { kind: "blocked" } | { kind: "admitted"; value: R } | { kind: "failed"; error: unknown };

export type QueueOutcome<R> =
  | { kind: "admitted"; value: R; waitedMs: number }
  | { kind: "rejected"; rejection: QueueRejection };

export interface QueueOptions {
  policy: QueuePolicy;
  maxLength: number;
  maxWaitMs: number;
  retryAfterMs: number;
}

export interface EnqueueMeta {
  priority: number;
  uncachedTokens: number;
  signal?: AbortSignal;
}

interface Entry<P, R> {
  readonly seq: number;
  readonly key: number;
  readonly enqueuedAt: number;
  readonly payload: P;
  live: boolean;
  resolve(o: QueueOutcome<R>): void;
  reject(e: unknown): void;
  detach(): void;
}

export class AdmissionQueue<P, R> {
  /** Binary max-heap on (key, then earliest seq); cancelled entries stay until popped or compacted. */
  #heap: Entry<P, R>[] = [];
  #live = 0;
  #seq = 0;
  readonly #epoch: number;

  constructor(private readonly now: NowFn, private readonly options: QueueOptions) {
    this.#epoch = now();
  }

  get depth(): number {
    return this.#live;
  }

  enqueue(payload: P, meta: EnqueueMeta): Promise<QueueOutcome<R>> {
    const o = this.options;
    if (this.#live >= o.maxLength) {
      return Promise.resolve({ kind: "rejected", rejection: { limit: "length", current: this.#live, max: o.maxLength, retryAfterMs: o.retryAfterMs } });
    }
    if (meta.signal?.aborted) return Promise.reject(cancelled());
    const now = this.now();
    return new Promise<QueueOutcome<R>>((resolve, reject) => {
      const entry: Entry<P, R> = {
        seq: this.#seq++,
        key: queueKey(o.policy, { arrivalSec: (now - this.#epoch) / 1000, priority: meta.priority, uncachedTokens: meta.uncachedTokens }),
        enqueuedAt: now, payload, live: true, resolve, reject, detach: () => {},
      };
      const signal = meta.signal;
      if (signal) {
        const onAbort = (): void => {
          if (this.#kill(entry)) reject(cancelled());
        };
        signal.addEventListener("abort", onAbort, { once: true });
        entry.detach = () => signal.removeEventListener("abort", onAbort);
      }
      this.#push(entry);
      this.#live++;
    });
  }

  /** Admits entries in policy order while `step` accepts the head; stops at the first blocked head (head-of-line). */
  drain(step: (payload: P) => StepResult<R>): number {
    let admitted = 0;
    for (;;) {
      const head = this.#peek();
      if (!head) return admitted;
      let r: StepResult<R>;
      try {
        r = step(head.payload);
      } catch (e) {
        r = { kind: "failed", error: e };
      }
      if (r.kind === "blocked") return admitted;
      this.#kill(head);
      if (r.kind === "admitted") {
        admitted++;
        head.resolve({ kind: "admitted", value: r.value, waitedMs: this.now() - head.enqueuedAt });
      } else head.reject(r.error);
    }
  }

  /** Rejects entries past the wait limit (429 outcome); returns how many left. */
  expire(): number {
    const now = this.now(), o = this.options;
    let n = 0;
    for (const e of this.#heap) {
      if (!e.live) continue;
      if (now - e.enqueuedAt >= o.maxWaitMs) {
        this.#kill(e);
        e.resolve({ kind: "rejected", rejection: { limit: "wait", current: now - e.enqueuedAt, max: o.maxWaitMs, retryAfterMs: o.retryAfterMs } });
        n++;
      }
    }
    return n;
  }

  /** Payloads of the live entries in admission order (for snapshots and tests). */
  pending(): P[] {
    return this.#heap.filter((e) => e.live).sort((a, b) => (before(a, b) ? -1 : 1)).map((e) => e.payload);
  }

  #kill(e: Entry<P, R>): boolean {
    if (!e.live) return false;
    e.live = false;
    e.detach();
    this.#live--;
    // Dead entries are dropped lazily; compact when they outnumber the live ones so the heap stays proportional.
    if (this.#heap.length > 32 && this.#heap.length > 2 * this.#live) this.#rebuild();
    return true;
  }

  #peek(): Entry<P, R> | undefined {
    while (this.#heap.length > 0 && !this.#heap[0]!.live) this.#popTop();
    return this.#heap[0];
  }

  #push(e: Entry<P, R>): void {
    const h = this.#heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  #popTop(): void {
    const h = this.#heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1, r = l + 1;
      let top = i;
      if (l < h.length && before(h[l]!, h[top]!)) top = l;
      if (r < h.length && before(h[r]!, h[top]!)) top = r;
      if (top === i) return;
      [h[i], h[top]] = [h[top]!, h[i]!];
      i = top;
    }
  }

  #rebuild(): void {
    const live = this.#heap.filter((e) => e.live);
    this.#heap = [];
    for (const e of live) this.#push(e);
  }
}

function before<P, R>(a: Entry<P, R>, b: Entry<P, R>): boolean {
  return a.key > b.key || (a.key === b.key && a.seq < b.seq);
}

function cancelled(): KvgateError {
  return new KvgateError("KVGATE_ERR_CANCELLED", "request cancelled while waiting in the router queue");
}
