/** @module The caller's grip on one routed request: report the first token, then end it exactly once. */
import type { Booking } from "./active-sequences.ts";
import type { FreeReason } from "./routing-types.ts";

export interface HandleOps {
  firstToken(b: Booking): boolean;
  free(b: Booking, reason: FreeReason): boolean;
}

/**
 * Bound to one booking, not to the request id, so a handle kept from a failed attempt cannot release the booking of
 * the retry. Every method is idempotent; the ending ones return true only for the call that actually freed.
 */
export class RequestHandle {
  constructor(private readonly booking: Booking, private readonly ops: HandleOps) {}

  get requestId(): string {
    return this.booking.requestId;
  }

  get worker(): string {
    return this.booking.rank.worker.id;
  }

  get dpRank(): number {
    return this.booking.rank.dpRank;
  }

  get endpoint(): string {
    return this.booking.rank.worker.endpoint;
  }

  /** Why the booking ended, or undefined while it is live. */
  get endedBy(): FreeReason | undefined {
    return this.booking.freed;
  }

  get active(): boolean {
    return this.booking.freed === undefined;
  }

  /** The first output token arrived: the prompt's prefill no longer loads the worker. */
  firstToken(): boolean {
    return this.ops.firstToken(this.booking);
  }

  finish(): boolean {
    return this.ops.free(this.booking, "finished");
  }

  fail(): boolean {
    return this.ops.free(this.booking, "failed");
  }

  cancel(): boolean {
    return this.ops.free(this.booking, "cancelled");
  }
}
