/**
 * @module The engine side of the events benchmark's ZeroMQ path, in a worker thread: publishing costs the engine's
 * CPU, not the router's, so it must not share the router's event loop. Plain JS so the worker needs no TS loader.
 * Protocol: workerData { payloads, topic }; posts its endpoint, then "subscribed"; on { cycles, seq } it publishes
 * every payload `cycles` times with consecutive 8-byte big-endian sequence numbers, then posts "sent" (and, given a
 * `sent` Int32Array over a SharedArrayBuffer in workerData, sets its element 0 to 1 and wakes a thread blocked on it).
 */
import { parentPort, workerData } from "node:worker_threads";
import { XPublisher } from "zeromq";

const { payloads, topic, sent } = workerData;
const pub = new XPublisher({ linger: 0, sendHighWaterMark: 10_000_000 });
await pub.bind("tcp://127.0.0.1:*");
parentPort.postMessage({ endpoint: pub.lastEndpoint });
await pub.receive(); // the subscription arrived: nothing published from here on is lost
parentPort.postMessage("subscribed");

const seqFrame = (seq) => {
  const b = new Uint8Array(8);
  const v = new DataView(b.buffer);
  v.setUint32(0, Math.floor(seq / 2 ** 32));
  v.setUint32(4, seq >>> 0);
  return b;
};

parentPort.on("message", async (m) => {
  if (m === "close") {
    pub.close();
    parentPort.close();
    return;
  }
  let seq = m.seq;
  for (let c = 0; c < m.cycles; c++) for (const p of payloads) await pub.send([topic, seqFrame(seq++), p]);
  if (sent) {
    Atomics.store(sent, 0, 1);
    Atomics.notify(sent, 0);
  }
  parentPort.postMessage("sent");
});
