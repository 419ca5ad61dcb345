/**
 * @module A ZMTP subscriber run under another runtime (Bun, Deno) by zmtp-runtimes.test.ts: it connects to the
 * endpoint in KVGATE_PROBE_ENDPOINT, prints "warm" at the first warm-up message (seq 2^32), then digests the next
 * KVGATE_PROBE_COUNT messages as its listener receives them (in place, as the gateway does), prints them as JSON
 * and then "done".
 */
import { readSeq } from "../../src/events/zmq-frames.ts";
import { zmtpSubscriber } from "../../src/zmq/zmtp-sockets.ts";
import { digest } from "../events/frame-payloads.ts";
import { nodeTcpDialer } from "../../src/adapter/node/tcp-dialer.ts";

const env = (k: string): string => {
  const v = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env[k];
  if (v === undefined) throw new Error(`${k} is not set`);
  return v;
};
const count = Number(env("KVGATE_PROBE_COUNT"));
const readBufferBytes = Number(env("KVGATE_PROBE_READ_BUFFER"));
const WARM = 2 ** 32;

const sub = zmtpSubscriber(nodeTcpDialer, { reconnectIntervalMs: 5, readBufferBytes });
sub.subscribe("kv@");
sub.connect(env("KVGATE_PROBE_ENDPOINT"));
let warm = false;
const got: [number, number, number][] = [];
await new Promise<void>((resolve) => {
  void sub.listen((frames) => {
    const seq = readSeq(frames[1]);
    if (seq === WARM) {
      if (!warm) console.log("warm");
      warm = true;
      return;
    }
    got.push([seq, frames[2]!.length, digest(frames[2]!)]);
    if (got.length === count) resolve();
  });
});
console.log(JSON.stringify({ got, counters: sub.counters }));
console.log("done");
sub.close();
