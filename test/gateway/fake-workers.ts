/**
 * @module Scripted workers behind an injected fetch, for gateway tests that need exact control of what a worker
 * sends and when: SSE split at odd byte boundaries, streams that break, hang or send errors, refused connections.
 */
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway, type Gateway, type GatewayHost } from "../../src/gateway/gateway.ts";
import { TOKEN } from "./helpers.ts";

export interface SeenRequest {
  worker: string;
  path: string;
  body: Record<string, unknown>;
  /** The body exactly as sent. */
  text: string;
  headers: Headers;
  signal: AbortSignal;
}

export type Script = (req: SeenRequest) => Response | Promise<Response>;

const encoder = new TextEncoder();

export class FakeFleet {
  readonly requests: SeenRequest[] = [];
  readonly scripts = new Map<string, Script>();

  readonly fetch: typeof fetch = async (input, init) => {
    const url = new URL(typeof input === "string" || input instanceof URL ? input.toString() : input.url);
    const worker = url.hostname.replace(/\.test$/, "");
    const seen: SeenRequest = {
      worker, path: url.pathname, body: init?.body ? JSON.parse(String(init.body)) : {}, text: init?.body ? String(init.body) : "", headers: new Headers(init?.headers), signal: init!.signal!,
    };
    this.requests.push(seen);
    const script = this.scripts.get(worker);
    if (!script) throw new TypeError("fetch failed", { cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }) });
    return script(seen);
  };

  /** Requests that reached `path` (default: the completion endpoints). */
  calls(path?: string): SeenRequest[] {
    return this.requests.filter((r) => (path ? r.path === path : r.path.startsWith("/v1/")));
  }
}

export interface StreamPlan {
  /** Chunks as sent (strings are UTF-8 encoded); each becomes one read on the gateway's side. */
  parts: (string | Uint8Array)[];
  /** After the parts: close cleanly, error the stream (a reset connection) or never finish. */
  end?: "close" | "error" | "hang";
}

/** A streamed response that follows `plan`, cancelling itself when the gateway aborts the request. */
export function sseResponse(plan: StreamPlan, signal?: AbortSignal, headers: Record<string, string> = {}): Response {
  let i = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(c) {
      if (i < plan.parts.length) {
        const p = plan.parts[i++]!;
        c.enqueue(typeof p === "string" ? encoder.encode(p) : p);
        return;
      }
      if (plan.end === "error") c.error(new TypeError("terminated"));
      else if (plan.end === "hang") await new Promise<void>((resolve) => signal?.addEventListener("abort", () => resolve(), { once: true }));
      else c.close();
    },
  });
  return new Response(body, { headers: { "content-type": "text/event-stream", ...headers } });
}

export const data = (obj: unknown): string => `data: ${typeof obj === "string" ? obj : JSON.stringify(obj)}\n\n`;

export function chatChunk(id: string, content: string | undefined, finish: string | null = null, role?: string): Record<string, unknown> {
  const delta: Record<string, unknown> = role ? { role, content: "" } : content === undefined ? {} : { content };
  return { id, object: "chat.completion.chunk", created: 1700000000, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] };
}

export function textChunk(id: string, text: string, finish: string | null = null): Record<string, unknown> {
  return { id, object: "text_completion", created: 1700000000, model: "m", choices: [{ index: 0, text, finish_reason: finish }] };
}

/** A gateway over a FakeFleet with workers w1..wn serving model "m" (approximate mode, no KV events). */
export async function fakeGateway(workers: number, argv: string[] = [], workerExtra = "", host: Omit<GatewayHost, "fetch"> = {}): Promise<{ gw: Gateway; fleet: FakeFleet; call(path: string, body: unknown, init?: RequestInit): Promise<Response> }> {
  const fleet = new FakeFleet();
  const specs = Array.from({ length: workers }, (_, i) => ["--worker", `url=http://w${i + 1}.test,id=w${i + 1},models=m${workerExtra}`]).flat();
  const loaded = await loadGatewayConfig({ argv: ["--admin-token", TOKEN, "--log", "off", "--health-probe-ms", "0", ...specs, ...argv], env: {} });
  if (loaded.kind !== "config") throw new Error("help");
  const gw = await createGateway(loaded.config, { ...host, fetch: fleet.fetch });
  const call = (path: string, body: unknown, init: RequestInit = {}) =>
    Promise.resolve(gw.fetch(new Request(`http://kvgate.test${path}`, { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body), ...init })));
  return { gw, fleet, call };
}
