/**
 * @module A fault-injecting HTTP proxy on loopback in front of a real simulated engine: it passes requests through
 * (streams included) until told to answer a path with an error status, or to stop listening altogether (connection
 * refused) and later listen again on the same port. For the health, circuit-breaker and metrics tests.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";

export class FaultProxy {
  /** Path prefix → status answered instead of forwarding. */
  readonly faults = new Map<string, number>();
  /** Requests seen per path. */
  readonly seen = new Map<string, number>();
  #server: Server | undefined;
  port = 0;

  constructor(readonly target: string) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async listen(port = 0): Promise<void> {
    const server = createServer((req, res) => void this.#handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
    this.#server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  /** Stops listening (new connections are refused) and cuts open ones. */
  async stop(): Promise<void> {
    const s = this.#server;
    this.#server = undefined;
    if (!s) return;
    await new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    });
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = req.url ?? "/";
    this.seen.set(path, (this.seen.get(path) ?? 0) + 1);
    for (const [prefix, status] of this.faults) {
      if (!path.startsWith(prefix)) continue;
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `injected ${status}`, type: "server_error" } }));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    try {
      const up = await fetch(this.target + path, {
        method: req.method, headers: { "content-type": req.headers["content-type"] ?? "application/json" },
        body: req.method === "GET" || req.method === "HEAD" ? undefined : Buffer.concat(chunks),
      });
      res.writeHead(up.status, { "content-type": up.headers.get("content-type") ?? "application/octet-stream" });
      if (up.body) Readable.fromWeb(up.body as never).pipe(res);
      else res.end();
    } catch {
      res.destroy();
    }
  }
}
