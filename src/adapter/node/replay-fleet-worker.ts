/**
 * @module The worker-thread side of a threaded replay fleet (replay-fleet.ts): starts the engines from workerData,
 * reports their URLs, forwards each KV-event batch to the parent with its bytes transferred, and closes the engines
 * when asked (then the thread ends on its own).
 */
import { parentPort, workerData } from "node:worker_threads";
import type { SimEngineOptions } from "../../sim/sim-options.ts";
import type { FleetWorkerMessage } from "./replay-fleet.ts";
import { startInProcessFleet } from "./replay-fleet.ts";

const port = parentPort!;
const data = workerData as { engines: SimEngineOptions[]; events: boolean };
const post = (m: FleetWorkerMessage, transfer: ArrayBuffer[] = []): void => port.postMessage(m, transfer);

try {
  const fleet = await startInProcessFleet({
    engines: data.engines,
    onBatch: data.events ? (batch) => post({ type: "batch", batch }, [batch.bytes.buffer]) : undefined,
  });
  port.on("message", (m: { type: string }) => {
    if (m.type !== "close") return;
    void fleet.close().then(() => {
      post({ type: "closed" });
      port.close();
    });
  });
  post({ type: "ready", urls: fleet.urls });
} catch (e) {
  post({ type: "error", message: (e as Error)?.message ?? String(e) });
}
