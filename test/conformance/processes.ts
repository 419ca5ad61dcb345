/**
 * @module Child processes for the conformance suite: spawn in their own process group (wrangler and workerd start
 * children of their own), wait for a line of output or an HTTP answer, and stop the whole group.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";

export interface Proc {
  readonly child: ChildProcess;
  /** Everything the process printed so far (stdout and stderr), for failure messages. */
  output(): string;
  /** SIGTERM to the group, SIGKILL after `graceMs`; resolves once the leader exited. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL to the group at once (a worker "dying"). */
  kill(): Promise<void>;
}

/**
 * Process groups still running. A test file whose setup fails before its afterAll stops them would otherwise leave
 * them behind (detached, they outlive the test worker): they are killed when the worker exits.
 */
const live = new Set<number>();
process.once("exit", () => {
  for (const pid of live) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

export function start(cmd: string, args: string[], opts: { env?: Record<string, string>; cwd?: string } = {}): Proc {
  const child = spawn(cmd, args, { cwd: opts.cwd, env: { ...process.env, ...opts.env }, stdio: ["ignore", "pipe", "pipe"], detached: true });
  // Kept until the group is stopped: the leader may exit while children it started (workerd) run on.
  if (child.pid !== undefined) live.add(child.pid);
  let out = "";
  child.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr!.on("data", (b: Buffer) => (out += b.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const signal = (sig: NodeJS.Signals): void => {
    try {
      process.kill(-child.pid!, sig);
    } catch {
      // already gone
    }
  };
  return {
    child,
    output: () => out,
    async stop(graceMs = 5_000) {
      if (child.exitCode !== null || child.signalCode !== null) {
        // The leader is gone; its group may not be.
        signal("SIGKILL");
        live.delete(child.pid!);
        return;
      }
      signal("SIGTERM");
      const t = setTimeout(() => signal("SIGKILL"), graceMs);
      await exited;
      clearTimeout(t);
      signal("SIGKILL");
      live.delete(child.pid!);
    },
    async kill() {
      signal("SIGKILL");
      await exited;
      live.delete(child.pid!);
    },
  };
}

/** Resolves with the first match of `re` in the process's output; rejects if it exits or `timeoutMs` passes. */
export function waitForOutput(p: Proc, re: RegExp, timeoutMs = 60_000): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const check = (): boolean => {
      const m = p.output().match(re);
      if (m) {
        done();
        resolve(m);
      }
      return !!m;
    };
    const onExit = (): void => {
      done();
      reject(new Error(`process exited before printing ${re}:\n${p.output()}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`no ${re} within ${timeoutMs} ms:\n${p.output()}`));
    }, timeoutMs);
    const poll = setInterval(check, 20);
    const done = (): void => {
      clearTimeout(timer);
      clearInterval(poll);
      p.child.off("exit", onExit);
    };
    p.child.once("exit", onExit);
    check();
  });
}

/** Polls `fn` until it returns a truthy value (errors count as "not yet"); the test timeout bounds the wait. */
export async function until<T>(fn: () => Promise<T | undefined | false>, what: string, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${String(last)})` : ""}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A loopback port nothing listens on right now. */
/**
 * A port free now, for a process that must listen on a port known in advance (or listen again on the same one after
 * a restart). Taken below the kernel's ephemeral range (32768–60999 here): a port from there can meanwhile become the
 * source port of some outgoing connection, and a listen on it then fails with EADDRINUSE.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await canListen(port)) return port;
    if (attempt >= 50) throw new Error("no free port found below the ephemeral range");
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}
