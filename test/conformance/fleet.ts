/**
 * @module The worker side of the conformance suite: simulated engines in this process (they push their KV events to
 * the gateway under test), a simulated engine in a process of its own (so it can be killed mid-stream), and
 * helpers to read SSE and talk to the gateway.
 */
import { join } from "node:path";
import { startSimServer, type SimServer } from "../../src/adapter/node/sim-server.ts";
import { realClock } from "../../src/sim/sim-clock.ts";
import { start, waitForOutput, type Proc } from "./processes.ts";
import { ROOT } from "./runtimes.ts";

export const MODEL = "conf-model";
export const OTHER_MODEL = "conf-other";
/** A LoRA adapter of MODEL that only worker A serves (discovered from its /v1/models). */
export const ADAPTER = "conf-lora";
export const TOKEN = "conformance-token";

export function simFor(gateway: string, workerId: string, model = MODEL, speedupRatio = 50, loraAdapters: string[] = []): Promise<SimServer> {
  return startSimServer({
    // An explicit clock: without one the HTTP push sink gets `clock: undefined` and never sends (reported).
    clock: realClock(),
    model, loraAdapters, workerId, speedupRatio, numGpuBlocks: 4096, maxModelLen: 8192,
    events: { url: `${gateway}/admin/kv-events`, token: TOKEN, flushIntervalMs: 5 },
  });
}

export interface SimProcess {
  url: string;
  proc: Proc;
}

/** A sim in its own Node process at real-time speed (about 6 ms per token), for cancellation and kill tests. */
export async function simProcess(gateway: string, workerId: string): Promise<SimProcess> {
  const proc = start(process.execPath, [
    join(ROOT, "src/adapter/node/kvgate.mjs"), "sim", "--port", "0", "--model", MODEL, "--worker-id", workerId, "--max-model-len", "8192",
    "--events-url", `${gateway}/admin/kv-events`, "--events-token", TOKEN, "--events-flush-ms", "5",
  ], { cwd: ROOT });
  const url = (await waitForOutput(proc, /serving \S+ at (http:\/\/\S+?),/))[1]!;
  return { url, proc };
}

export const admin = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };

export function post(url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body), signal });
}

/** Reads an SSE body event by event (the `data:` payloads), as a client would. */
export async function* sseData(res: Response): AsyncGenerator<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let at: number;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, at);
      buf = buf.slice(at + 2);
      const data = ev.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (data) yield data;
    }
  }
  if (buf.trim()) throw new Error(`stream ended inside an event: ${JSON.stringify(buf)}`);
}

export async function allData(res: Response): Promise<string[]> {
  const out: string[] = [];
  for await (const d of sseData(res)) out.push(d);
  return out;
}

/** The value of a Prometheus series (first line starting with `series`), or undefined. */
export function metric(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

export const longText = (tag: string, n = 60): string => `${tag}: ${"The quick brown fox jumps over the lazy dog. ".repeat(n)}`;
