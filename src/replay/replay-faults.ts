/**
 * @module Faults a replay can inject into its simulated fleet, to compare how policies recover: an engine that loses
 * its cache mid-run without a KV event reaching the router, one that restarts and whose KV events never reach the
 * router again, and an engine whose real cache is smaller than the router is told. Parsed from `--faults`, applied
 * identically to every policy.
 */
import { KvgateError } from "../core/errors.ts";

export type ReplayFault =
  /** At `at` (share of the requests sent), worker `worker` forgets its whole prefix cache silently. */
  | { kind: "lose_cache"; worker: number; at: number }
  /**
   * At `at`, worker `worker` restarts (its cache is gone) and from then on none of its KV events reach the router, as
   * when an engine comes back publishing on an endpoint the router does not subscribe to. Precise mode only.
   */
  | { kind: "lose_events"; worker: number; at: number }
  /** Worker `worker`'s engine has `factor` × the configured KV blocks; the router still assumes the full size. */
  | { kind: "small_cache"; worker: number; factor: number };

const SYNTAX = "lose_cache:W@F (worker W loses its cache silently after share F of the requests), lose_events:W@F (worker W restarts there and "
  + "its KV events stop reaching the router) or small_cache:W@F (worker W's engine has F × the blocks)";

type MidRunFault = Extract<ReplayFault, { at: number }>;

/** `lose_cache:1@0.5,small_cache:2@0.25` → faults; workers are 0-based indexes checked against the fleet size. */
export function parseFaults(text: string, workers: number): ReplayFault[] {
  const out: ReplayFault[] = [];
  for (const part of text.split(",").map((s) => s.trim()).filter((s) => s !== "")) {
    const m = /^(lose_cache|lose_events|small_cache):(\d+)@([0-9.]+)$/.exec(part.replace(/-/g, "_"));
    if (!m) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--faults: cannot read ${JSON.stringify(part)}; expected ${SYNTAX}`);
    const worker = Number(m[2]), value = Number(m[3]);
    if (worker >= workers) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--faults: worker ${worker} does not exist (the fleet has ${workers})`);
    if (!(value > 0 && value <= 1)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--faults: ${part}: the share must be in (0, 1]`);
    out.push(m[1] === "small_cache" ? { kind: "small_cache", worker, factor: value } : { kind: m[1] as MidRunFault["kind"], worker, at: value });
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
  readonly #pending: MidRunFault[];

  constructor(faults: readonly ReplayFault[], private readonly fire: (fault: MidRunFault) => Promise<void>) {
    this.#pending = faults.filter((f): f is MidRunFault => "at" in f).sort((a, b) => a.at - b.at);
  }

  /** Starts every fault whose point has been reached; returns the promises of those fired now. */
  sent(k: number, total: number): Promise<void>[] {
    const fired: Promise<void>[] = [];
    while (this.#pending.length > 0 && k >= this.#pending[0]!.at * total) fired.push(this.fire(this.#pending.shift()!));
    return fired;
  }
}

export function describeFaults(faults: readonly ReplayFault[]): string {
  return faults.map((f) => {
    if (f.kind === "small_cache") return `w${f.worker}'s engine has ${Math.round(f.factor * 100)}% of the assumed blocks`;
    const at = `${Math.round(f.at * 100)}% of the requests`;
    return f.kind === "lose_cache" ? `w${f.worker} loses its cache silently at ${at}` : `w${f.worker} restarts at ${at} and its KV events stop reaching the router`;
  }).join("; ");
}
