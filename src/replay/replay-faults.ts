/**
 * @module Faults a replay can inject into its simulated fleet, to compare how policies recover: an engine that loses
 * its cache mid-run without a KV event reaching the router, and an engine whose real cache is smaller than the
 * router is told. Parsed from `--faults`, applied identically to every policy.
 */
import { KvgateError } from "../core/errors.ts";

export type ReplayFault =
  /** At `at` (share of the requests sent), worker `worker` forgets its whole prefix cache silently. */
  | { kind: "lose_cache"; worker: number; at: number }
  /** Worker `worker`'s engine has `factor` × the configured KV blocks; the router still assumes the full size. */
  | { kind: "small_cache"; worker: number; factor: number };

const SYNTAX = "lose_cache:W@F (worker W loses its cache silently after share F of the requests) or small_cache:W@F (worker W's engine has F × the blocks)";

/** `lose_cache:1@0.5,small_cache:2@0.25` → faults; workers are 0-based indexes checked against the fleet size. */
export function parseFaults(text: string, workers: number): ReplayFault[] {
  const out: ReplayFault[] = [];
  for (const part of text.split(",").map((s) => s.trim()).filter((s) => s !== "")) {
    const m = /^(lose_cache|small_cache):(\d+)@([0-9.]+)$/.exec(part.replace(/-/g, "_"));
    if (!m) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--faults: cannot read ${JSON.stringify(part)}; expected ${SYNTAX}`);
    const worker = Number(m[2]), value = Number(m[3]);
    if (worker >= workers) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--faults: worker ${worker} does not exist (the fleet has ${workers})`);
    if (!(value > 0 && value <= 1)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--faults: ${part}: the share must be in (0, 1]`);
    out.push(m[1] === "lose_cache" ? { kind: "lose_cache", worker, at: value } : { kind: "small_cache", worker, factor: value });
  }
  return out;
}

/** The KV blocks engine `worker` really has, given the blocks every engine is configured with. */
export function engineBlocks(faults: readonly ReplayFault[], worker: number, configured: number): number {
  let n = configured;
  for (const f of faults) if (f.kind === "small_cache" && f.worker === worker) n = Math.max(1, Math.floor(n * f.factor));
  return n;
}

/** Fires the mid-run faults as requests go out: call `sent(k, total)` after the k-th request is sent. */
export class FaultSchedule {
  readonly #pending: { worker: number; at: number }[];

  constructor(faults: readonly ReplayFault[], private readonly fire: (worker: number) => Promise<void>) {
    this.#pending = faults.flatMap((f) => (f.kind === "lose_cache" ? [{ worker: f.worker, at: f.at }] : [])).sort((a, b) => a.at - b.at);
  }

  /** Starts every fault whose point has been reached; returns the promises of those fired now. */
  sent(k: number, total: number): Promise<void>[] {
    const fired: Promise<void>[] = [];
    while (this.#pending.length > 0 && k >= this.#pending[0]!.at * total) fired.push(this.fire(this.#pending.shift()!.worker));
    return fired;
  }
}

export function describeFaults(faults: readonly ReplayFault[]): string {
  return faults.map((f) => (f.kind === "lose_cache" ? `w${f.worker} loses its cache silently at ${Math.round(f.at * 100)}% of the requests`
    : `w${f.worker}'s engine has ${Math.round(f.factor * 100)}% of the assumed blocks`)).join("; ");
}
