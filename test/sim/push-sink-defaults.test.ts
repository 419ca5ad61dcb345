import { describe, it, expect, afterAll } from "vitest";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

let sim: SimServer | undefined;
let receiver: Server | undefined;
afterAll(async () => {
  await sim?.close();
  await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
});

describe("sim started with only an events URL", () => {
  it("should push its KV events (the real clock is the default when none is given)", async () => {
    const seen: { seq: string | undefined; bytes: number }[] = [];
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        seen.push({ seq: req.headers["x-kvgate-seq"] as string | undefined, bytes: Buffer.concat(chunks).length });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver!.listen(0, "127.0.0.1", () => r()));
    const port = (receiver.address() as AddressInfo).port;
    sim = await startSimServer({ events: { url: `http://127.0.0.1:${port}/admin/kv-events` } });
    const res = await fetch(`${sim.url}/v1/completions`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "kvgate-sim", prompt: Array.from({ length: 64 }, (_, i) => i + 1), max_tokens: 2 }),
    });
    expect(res.status).toBe(200);
    await res.json();
    for (let i = 0; i < 100 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(seen.length).toBeGreaterThan(0);
    expect(seen[0]!.seq).toBe("0");
    expect(seen[0]!.bytes).toBeGreaterThan(0);
  });
});
