/**
 * @module The built-in fleet: with no worker configured, `kvgate serve` (and so `npm start`) starts simulated engines
 * on loopback and wires their KV events straight into the gateway, so a newcomer's first request works. With
 * `--sim-prefill-workers N` it is a disaggregated fleet instead: N prefill engines and the `--sim-workers` engines as
 * decode workers (each sim's bootstrap port is its own HTTP port, so both `--disaggregation` flows work). The engines
 * are HTTP servers, started by the runtime adapter's `startSim`.
 */
import type { Gateway } from "../gateway/gateway.ts";
import type { WorkerRole } from "../routing/index.ts";
import { callbackSink } from "./index.ts";
import type { SimServer, StartSimServer } from "./sim-server.ts";

export const SIM_MODEL = "kvgate-sim";

export interface DefaultFleet {
  servers: SimServer[];
  close(): Promise<void>;
}

/**
 * Starts `count` engines and registers them with events on: their prompts are tokenized by the same approximate
 * tokenizer the gateway uses without a tokenizer.json, so the block hashes in their events are the gateway's own.
 */
export async function startDefaultFleet(gateway: Gateway, startSim: StartSimServer, count: number, gpuBlocks: number, blockSize: number, prefillCount = gateway.state.config.simPrefillWorkers): Promise<DefaultFleet> {
  const { ingest, fleet, log } = gateway.state;
  const servers: SimServer[] = [];
  const roles: { workerId: string; role: WorkerRole }[] = prefillCount > 0
    ? [...Array.from({ length: prefillCount }, (_, i) => ({ workerId: `sim-prefill-${i}`, role: "prefill" as const })),
      ...Array.from({ length: count }, (_, i) => ({ workerId: `sim-decode-${i}`, role: "decode" as const }))]
    : Array.from({ length: count }, (_, i) => ({ workerId: `sim-${i}`, role: "aggregated" as const }));
  try {
    for (const { workerId, role } of roles) {
      const sink = callbackSink({ workerId, dpRank: 0 }, (b) => {
        const r = ingest.ingest({ worker: b.workerId, dpRank: b.dpRank, seq: b.seq, bytes: b.bytes });
        void r;
      });
      const loraAdapters = gateway.state.config.simLoraAdapters;
      const server = await startSim({ workerId, model: SIM_MODEL, loraAdapters, numGpuBlocks: gpuBlocks, blockSize, sinks: [sink], role });
      servers.push(server);
      await fleet.add({
        url: server.url, id: workerId, models: [SIM_MODEL], adapters: loraAdapters, blockSize, kvEvents: true, totalKvBlocks: gpuBlocks, role,
        // The prefill busy probe measures load against a batch; the aggregated fleet keeps the router's default.
        ...(role === "prefill" ? { maxBatchedTokens: server.engine.options.maxNumBatchedTokens, bootstrapPort: server.port } : {}),
      });
    }
  } catch (e) {
    await Promise.allSettled(servers.map((s) => s.close()));
    throw e;
  }
  const what = prefillCount > 0 ? `${prefillCount} prefill + ${count} decode simulated engines` : `${count} simulated engines`;
  log("info", `built-in fleet: ${what} (${servers.map((s) => s.url).join(", ")}), model ${SIM_MODEL}`);
  return { servers, close: async () => void (await Promise.allSettled(servers.map((s) => s.close()))) };
}

/** What to paste to try it. */
export function tryItLine(baseUrl: string): string {
  const body = JSON.stringify({ model: SIM_MODEL, stream: true, messages: [{ role: "user", content: "Hello from kvgate!" }], max_tokens: 16 });
  return `try:\n  curl -N ${baseUrl}/v1/chat/completions -H 'content-type: application/json' -d '${body}'\n`;
}
