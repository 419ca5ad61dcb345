/** @module A real nats-server (Debian's `nats-server`, JetStream on) on a random loopback port, for the replica tests. */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../conformance/processes.ts";

export const natsServerPath: string | undefined = (() => {
  const r = spawnSync("sh", ["-c", "command -v nats-server"], { encoding: "utf8" });
  return r.status === 0 ? r.stdout.trim() : undefined;
})();

export class NatsServer {
  #proc: ChildProcess | undefined;
  private constructor(readonly port: number, readonly storeDir: string) {}

  static async start(): Promise<NatsServer> {
    const n = new NatsServer(await freePort(), mkdtempSync(join(tmpdir(), "kvgate-nats-")));
    await n.restart();
    return n;
  }

  /** The running server's process id (benches pin it to a CPU). */
  get pid(): number | undefined {
    return this.#proc?.pid;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Starts the server (again) on the same port and store; resolves once it accepts clients. */
  async restart(): Promise<void> {
    const p = spawn(natsServerPath!, ["-js", "-sd", this.storeDir, "-a", "127.0.0.1", "-p", String(this.port)], { stdio: ["ignore", "pipe", "pipe"] });
    this.#proc = p;
    await new Promise<void>((resolve, reject) => {
      let out = "";
      const timer = setTimeout(() => reject(new Error(`nats-server did not start: ${out}`)), 15_000);
      const onData = (b: Buffer) => {
        out += b.toString();
        if (out.includes("Server is ready")) {
          clearTimeout(timer);
          resolve();
        }
      };
      p.stdout!.on("data", onData);
      p.stderr!.on("data", onData);
      p.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`nats-server exited with ${code}: ${out}`));
      });
    });
  }

  async stop(): Promise<void> {
    const p = this.#proc;
    this.#proc = undefined;
    if (!p || p.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once("exit", () => resolve());
      p.kill("SIGTERM");
    });
  }

  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.storeDir, { recursive: true, force: true });
  }
}
