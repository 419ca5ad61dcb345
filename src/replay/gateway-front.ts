/**
 * @module The replay's round-robin front over already-running gateways (`kvgate replay --gateway A,B,...`): request i
 * goes to the next gateway in turn, as a plain load balancer would. A gateway that refuses the connection is skipped
 * for a while and the request goes to the next one, so a dead replica costs only the requests that were in flight on it.
 */

export interface GatewayFrontOptions {
  /** Base URLs, no trailing slash. */
  urls: readonly string[];
  /** Clock ms (the replay's clock). */
  now: () => number;
  /** How long a gateway that refused a connection is left out before it is tried again. */
  downForMs: number;
}

export class GatewayFront {
  readonly urls: readonly string[];
  readonly #downUntil: number[];
  #next = 0;
  /** Connections refused, per gateway (each one sent the request on to another gateway). */
  readonly refused: number[];

  constructor(private readonly o: GatewayFrontOptions) {
    if (o.urls.length === 0) throw new RangeError("a gateway front needs at least one URL");
    this.urls = o.urls.map((u) => u.replace(/\/+$/, ""));
    this.#downUntil = this.urls.map(() => -Infinity);
    this.refused = this.urls.map(() => 0);
  }

  /** The next gateway in turn among those not left out; when all are, the next in turn anyway (someone must try). */
  pick(): number {
    const n = this.urls.length, now = this.o.now();
    for (let k = 0; k < n; k++) {
      const i = (this.#next + k) % n;
      if (this.#downUntil[i]! <= now) {
        this.#next = (i + 1) % n;
        return i;
      }
    }
    const i = this.#next;
    this.#next = (i + 1) % n;
    return i;
  }

  /** Gateway `i` refused a connection: leave it out for downForMs. */
  refusedBy(i: number): void {
    this.refused[i]!++;
    this.#downUntil[i] = this.o.now() + this.o.downForMs;
  }
}

/** A fetch error that means nothing reached the server (connection refused): safe to send the request elsewhere. */
export function connectionRefused(e: unknown): boolean {
  for (let c: unknown = e, depth = 0; c && depth < 5; c = (c as { cause?: unknown }).cause, depth++) {
    const code = (c as { code?: unknown }).code;
    if (code === "ECONNREFUSED") return true;
    const msg = (c as { message?: unknown }).message;
    if (typeof msg === "string" && /ECONNREFUSED|connection refused/i.test(msg)) return true;
  }
  return false;
}
