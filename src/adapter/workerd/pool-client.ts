/**
 * @module The Worker's calls to its pool object: a request forwarded as it came, the decision (one committed
 * `POST /v1/route`) and the plan reports, chained so they reach the object in the order they happened.
 */
import type { ExplainTable } from "../../gateway/explain.ts";
import type { ExecutionContext } from "./env-boot.ts";

export interface PoolStub {
  fetch(req: Request): Promise<Response>;
}

export interface PoolNamespace {
  idFromName(name: string): unknown;
  get(id: unknown): PoolStub;
}

/** The decision fields the Worker uses (the committed /v1/route answer). */
export interface Decision {
  plan_id: string;
  request_id: string;
  worker: string;
  dp_rank: number;
  endpoint: string;
  overlap_blocks: number;
  prompt_blocks: number;
  /** The plan's TTL left; first_token and keepalive start it again. */
  expires_in_ms: number;
  /** The candidates table, when the client asked with x-kvgate-explain (and the admin token). */
  explain?: ExplainTable;
}

export type Report = "first_token" | "keepalive" | "complete" | "cancel";

/** The object's origin is never resolved; a stub routes by path only. */
const ORIGIN = "https://kvgate-pool";

export class PoolClient {
  constructor(private readonly stub: PoolStub, private readonly routeToken: string | undefined) {}

  forward(req: Request): Promise<Response> {
    return this.stub.fetch(req);
  }

  /** Asks for (and books) a decision; the client's headers go along for the session header. */
  decide(bodyText: string, clientHeaders: Headers): Promise<Response> {
    const headers = new Headers(clientHeaders);
    headers.delete("content-length");
    headers.set("content-type", "application/json");
    if (this.routeToken) headers.set("authorization", `Bearer ${this.routeToken}`);
    return this.stub.fetch(new Request(`${ORIGIN}/v1/route`, { method: "POST", headers, body: bodyText }));
  }

  /** The reports on one plan, sent in order in the background (the client's response does not wait for them). */
  reporter(planId: string, ctx: ExecutionContext): (what: Report, body?: Record<string, unknown>) => void {
    let chain: Promise<unknown> = Promise.resolve();
    // Held from the start: a report sent after the client went away must still be let run by the runtime.
    let settle!: () => void;
    ctx.waitUntil(new Promise<void>((resolve) => (settle = resolve)));
    return (what, body = {}) => {
      chain = chain.then(() => this.#report(planId, what, body)).catch((e) => {
        console.error(`kvgate warn: report ${what} on ${planId} failed: ${String((e as Error)?.message ?? e)}`);
      });
      if (what === "complete" || what === "cancel") void chain.then(settle);
    };
  }

  async #report(planId: string, what: Report, body: Record<string, unknown>): Promise<void> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.routeToken) headers.authorization = `Bearer ${this.routeToken}`;
    const res = await this.stub.fetch(new Request(`${ORIGIN}/v1/route/${planId}/${what}`, { method: "POST", headers, body: JSON.stringify(body) }));
    // 404: the plan already ended (expired, or its worker was removed); nothing is left to free.
    if (!res.ok && res.status !== 404) throw new Error(`the pool answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
    await res.body?.cancel();
  }
}
