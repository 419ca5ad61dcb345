/**
 * @module kvgate's ZMTP client under Bun and Deno, as real processes against a libzmq publisher on loopback: the
 * in-place read path (node:net `onread` into a shared buffer, frames handed to the listener as views) must give every
 * message exactly there too, with the default buffer and with one small enough that most frames span reads.
 */
import { afterEach, describe, expect, it } from "vitest";
import { join } from "node:path";
import { Publisher } from "zeromq";
import { encodeSeq } from "../../src/events/zmq-frames.ts";
import { start, waitForOutput, type Proc } from "../conformance/processes.ts";
import { ROOT } from "../conformance/runtimes.ts";
import { digest, payload, sizes } from "../events/frame-payloads.ts";

const BIN = join(ROOT, "node_modules/.bin");
const PROBE = "test/zmq/zmtp-probe.ts";
const COMMANDS = {
  bun: [join(BIN, "bun"), [PROBE]],
  deno: [join(BIN, "deno"), ["run", "--no-prompt", "--allow-net", "--allow-read", "--allow-env", PROBE]],
} as const;

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

describe.each(["bun", "deno"] as const)("kvgate's ZMTP client on %s", (runtime) => {
  it.each([
    ["the default read buffer", 4 * 1024 * 1024],
    // Reads this small end inside a frame header now and then: undecoded bytes must be copied before the next read.
    ["a 509-byte read buffer", 509],
  ])("should hand every message to its listener exactly, with %s", async (_, readBuffer) => {
    const pub = new Publisher({ linger: 0, sendHighWaterMark: 1_000_000 });
    await pub.bind("tcp://127.0.0.1:*");
    cleanup.push(() => pub.close());
    const N = 700;
    const [cmd, args] = COMMANDS[runtime];
    const proc: Proc = start(cmd, [...args], {
      cwd: ROOT,
      env: { KVGATE_PROBE_ENDPOINT: pub.lastEndpoint!, KVGATE_PROBE_COUNT: String(N), KVGATE_PROBE_READ_BUFFER: String(readBuffer) },
    });
    cleanup.push(() => proc.stop());
    // All of its output: "exit" can come before the pipes are drained, "close" comes after.
    const closed = new Promise<void>((resolve) => proc.child.once("close", () => resolve()));
    // A plain PUB cannot tell when the subscription reached it: warm-up messages until the probe has one.
    let warm = false;
    void waitForOutput(proc, /^warm$/m, 60_000).then(() => (warm = true), () => undefined);
    while (!warm) {
      if (proc.child.exitCode !== null) throw new Error(`${runtime} probe exited:\n${proc.output()}`);
      await pub.send(["kv@w", encodeSeq(2 ** 32), new Uint8Array(0)]);
      await new Promise((r) => setTimeout(r, 10));
    }
    for (let i = 0; i < N; i++) {
      await pub.send(["other", encodeSeq(i), payload(i, sizes(i))]);
      await pub.send(["kv@w", encodeSeq(i), payload(i, sizes(i))]);
    }
    const late = new Promise<"late">((r) => setTimeout(() => r("late"), 30_000).unref());
    if ((await Promise.race([closed, late])) === "late") throw new Error(`${runtime} probe still running after 30 s:\n${proc.output().slice(-2000)}`);
    const line = /^(\{"got".*)\ndone$/m.exec(proc.output())?.[1];
    if (!line) throw new Error(`${runtime} probe ended without its report:\n${proc.output()}`);
    const { got, counters } = JSON.parse(line) as { got: [number, number, number][]; counters: Record<string, unknown> };
    expect(got).toEqual(Array.from({ length: N }, (_, i) => [i, payload(i, sizes(i)).length, digest(payload(i, sizes(i)))]));
    expect(counters).toMatchObject({ connects: 1, protocolErrors: 0, listenerErrors: 0 });
  }, 120_000);
});
