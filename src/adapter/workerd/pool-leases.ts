/**
 * @module Stream leases on the pool path: workerd can end a request whose client left without cancelling its body
 * or firing its signal, so the relay never runs again and its plan would hold its booking until the plan's TTL. A
 * stream nobody has pulled from for the lease has its plan cancelled by the next request this isolate serves,
 * through that request's own pool stub (an I/O object cannot be used from another request).
 */
import { StreamLeases, type StreamLease } from "../../gateway/stream-leases.ts";
import type { ExecutionContext } from "./env-boot.ts";
import type { PoolClient } from "./pool-client.ts";

export class PoolLeases {
  readonly #leases: StreamLeases;
  #abandoned: string[] = [];

  /**
   * @param leaseMs longest wait for the client's next pull (0 = off).
   * @param pendingMs longest a pull may wait on the engine on top of the lease (the idle timeout bounds that wait).
   */
  constructor(leaseMs: number, pendingMs: number, readonly now: () => number = () => Date.now()) {
    this.#leases = new StreamLeases(leaseMs, pendingMs);
  }

  /** A lease on plan `planId`'s stream; `stop` runs when it expires (the relay stops reporting on that plan). */
  open(planId: string, stop: () => void): StreamLease | undefined {
    return this.#leases.open(this.now(), () => {
      stop();
      this.#abandoned.push(planId);
    });
  }

  /** Cancels, through `pool`, the plans of the streams whose lease ran out; returns how many. */
  sweep(pool: PoolClient, ctx: ExecutionContext): number {
    this.#leases.sweep(this.now());
    const plans = this.#abandoned.splice(0);
    for (const id of plans) pool.reporter(id, ctx)("cancel");
    if (plans.length > 0) {
      console.error(`kvgate warn: ${plans.length} streamed response(s) unread for ${this.#leases.leaseMs} ms: their plans were cancelled (the client is likely gone)`);
    }
    return plans.length;
  }

  get size(): number {
    return this.#leases.size;
  }
}
