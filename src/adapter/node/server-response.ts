/**
 * @module Node's ServerResponse for the gateway: a streamed answer's headers go out with its first chunk. The
 * Node adapter (@hono/node-server) flushes a stream's headers on their own the moment the handler returns, which
 * costs a socket write and wakes the client once more per request; on a busy host that is as much as the rest
 * of a chunk's relay. An LLM stream's first chunk follows its headers within the prefill, so the headers wait
 * for it — but never longer than `holdMs`, so a client still sees the status soon when the prefill is long.
 */
import { ServerResponse, type IncomingMessage } from "node:http";

/** How long a stream's headers may wait for its first chunk. */
export const HEADER_HOLD_MS = 10;

/** A ServerResponse class whose flushHeaders() waits up to `holdMs` for the first write (which carries them). */
export function headerCoalescingResponse(holdMs = HEADER_HOLD_MS): typeof ServerResponse {
  return class HeaderCoalescingResponse<Req extends IncomingMessage = IncomingMessage> extends ServerResponse<Req> {
    #held = false;

    override flushHeaders(): void {
      if (this.#onWire() || this.#held) return;
      this.#held = true;
      setTimeout(() => {
        if (!this.#onWire() && !this.destroyed && !this.writableEnded) super.flushHeaders();
      }, holdMs).unref();
    }

    /** `headersSent` turns true as soon as writeHead() builds them; `_headerSent` once a write carried them. */
    #onWire(): boolean {
      return (this as unknown as { _headerSent?: boolean })._headerSent === true;
    }
  } as typeof ServerResponse;
}
