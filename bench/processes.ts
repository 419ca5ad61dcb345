/** @module Server processes a bench starts: spawned in their own process group from the repository root, killed as a group. */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

export interface Proc {
  child: ChildProcess;
  url: string;
}

/** Spawns a process in its own group and resolves with the URL it prints (the first group of `pattern`). */
export function launch(cmd: string, args: string[], pattern: RegExp): Promise<Proc> {
  const child = spawn(cmd, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], detached: true });
  let out = "";
  return new Promise((resolve, reject) => {
    const onData = (b: Buffer): void => {
      out += b.toString();
      const m = out.match(pattern);
      if (m) resolve({ child, url: m[1]! });
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`${cmd} ${args.join(" ")} exited (${code}) before listening:\n${out}`)));
  });
}

/** Kills the process and everything it started. */
export function stop(p: Proc | undefined): void {
  if (!p) return;
  try {
    process.kill(-p.child.pid!, "SIGKILL");
  } catch {
    // gone already
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux; NaN elsewhere). */
export function processCpuSeconds(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Fields 14 and 15 of stat (utime, stime), counted after the command name; clock ticks of 1/100 s on Linux.
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return NaN;
  }
}
