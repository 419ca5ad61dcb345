/**
 * @module `kvgate replay` on Node: the ReplayHost (simulated engines in a worker thread or this one, the gateway on
 * a loopback server, files, stdio, wall clock) that the Web-standard replay in src/replay/ runs on.
 */
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { createReadStream } from "node:fs";
import { stat, writeFile } from "node:fs/promises";
import { openDecisionLogFile } from "./decision-log-file.ts";
import { Readable } from "node:stream";
import { serve } from "@hono/node-server";
import { KvgateError } from "../../core/errors.ts";
import { performanceWallClock } from "../../replay/schedule.ts";
import type { FetchHandler, ReplayHost, RunningServer } from "../../replay/replay-host.ts";
import { runReplayCommand } from "../../replay/replay-command.ts";
import { startInProcessFleet, startThreadFleet } from "./replay-fleet.ts";

/** Serves a fetch handler on 127.0.0.1 (any free port). */
export function serveOnLoopback(handler: FetchHandler): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const s = serve({ fetch: handler, port: 0, hostname: "127.0.0.1" }, (info: AddressInfo) => {
      const server = s as Server;
      let closing: Promise<void> | undefined;
      resolve({
        url: `http://127.0.0.1:${info.port}`,
        close: () => (closing ??= new Promise<void>((done) => {
          server.close(() => done());
          server.closeAllConnections();
        })),
      });
    }) as Server;
    s.once("error", reject);
  });
}

async function open(pathOrUrl: string): Promise<ReadableStream<Uint8Array>> {
  if (/^https?:\/\//i.test(pathOrUrl)) {
    const res = await fetch(pathOrUrl);
    if (!res.ok || !res.body) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${pathOrUrl}: HTTP ${res.status}`);
    return res.body;
  }
  const st = await stat(pathOrUrl).catch(() => undefined);
  if (!st?.isFile()) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${pathOrUrl}: no such file`);
  return Readable.toWeb(createReadStream(pathOrUrl)) as ReadableStream<Uint8Array>;
}

export interface NodeReplayHostOptions {
  /** Where the simulated engines run: a worker thread (default: the second core) or this thread. */
  fleet?: "thread" | "in-process";
}

export function nodeReplayHost(o: NodeReplayHostOptions = {}): ReplayHost {
  return {
    startFleet: o.fleet === "in-process" ? startInProcessFleet : startThreadFleet,
    serve: serveOnLoopback,
    open,
    writeFile: (path, text) => writeFile(path, text, "utf8"),
    decisionLog: openDecisionLogFile,
    stdout: (t) => void process.stdout.write(t),
    stderr: (t) => void process.stderr.write(t),
    stderrIsTTY: process.stderr.isTTY === true,
    wall: performanceWallClock,
    fetch: globalThis.fetch.bind(globalThis),
  };
}

/** Entry for the CLI dispatcher: `runReplayCommandOnNode(process.argv.slice(3))`. */
export function runReplayCommandOnNode(args: readonly string[]): Promise<number> {
  return runReplayCommand(args, nodeReplayHost());
}
