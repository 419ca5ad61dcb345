import { describe, it, expect, afterEach } from "vitest";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { parseSimArgs } from "../../src/sim/sim-command.ts";

let sim: SimServer | undefined;
let receiver: Server | undefined;
afterEach(async () => {
  await sim?.close();
  await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
  sim = receiver = undefined;
});

describe("sim started with only an events URL", () => {
  for (const via of ["options", "kvgate sim flags"] as const) {
    it(`should push its KV events (given ${via}; the real clock and the flush interval default)`, async () => {
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
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/admin/kv-events`;
      // The command forwards every --events-* option, unset ones as undefined: they must not erase the defaults.
      const fromFlags = parseSimArgs(["--port", "0", "--events-url", url]);
      if (fromFlags === "help") throw new Error("help");
      expect(fromFlags.events).toHaveProperty("flushIntervalMs", undefined);
      sim = await startSimServer(via === "options" ? { events: { url } } : { ...fromFlags.engine, events: fromFlags.events });
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
  }
});
