/**
 * @module Conditional disaggregation: whether a request is prefilled on a prefill worker or on its decode worker, and why
 * (the reason is a metric label); the rules are in docs/disaggregation.md.
 */
import { isKvgateError } from "../core/errors.ts";
import type { WorkerTarget } from "../routing/index.ts";
import type { Exchange, GatewayState } from "./gateway-state.ts";

export type PrefillWhere = "remote" | "local";

export type DisaggReason =
  /** remote: the uncached part on the decode worker is large enough and the prefill pool has room. */
  | "uncached_tokens"
  /** remote: no condition applies (SGLang flow, or the threshold is 0). */
  | "unconditional"
  /** remote: the client pinned the request to a prefill worker. */
  | "target"
  | "small_uncached"
  | "prefill_busy"
  | "no_prefill_workers"
  /** local: the prefill leg failed (connect, 5xx, timeout, no kv_transfer_params in its answer). */
  | "prefill_failed";

export interface Decision {
  where: PrefillWhere;
  reason: DisaggReason;
}

/** The client's pin split by the role of the pinned worker: it applies to the leg that runs on such a worker. */
export interface LegTargets {
  prefill?: WorkerTarget;
  decode?: WorkerTarget;
}

/** True when the model (any model when the request names none) has decode-role workers: it is served disaggregated. */
export function servesDisaggregated(gw: GatewayState, model: string | undefined): boolean {
  for (const w of gw.fleet.list()) if (w.role === "decode" && (model === undefined || w.models.includes(model))) return true;
  return false;
}

export function legTargets(gw: GatewayState, ex: Exchange): LegTargets {
  const t = ex.ext.target;
  if (!t) return {};
  return gw.fleet.get(t.worker)?.role === "prefill" ? { prefill: t } : { decode: t };
}

/** Exclusions of this request (the client's and the workers that already failed it). */
export function excludedOf(ex: Exchange): string[] {
  return ex.ext.exclude ? [...ex.ext.exclude, ...ex.excluded] : ex.excluded;
}

/** The vLLM flow's choice for one dispatch (books nothing). Throws when the decode pool itself cannot serve. */
export async function decidePrefill(gw: GatewayState, ex: Exchange, tokens: Uint32Array, targets: LegTargets): Promise<Decision> {
  if (targets.prefill) return { where: "remote", reason: "target" };
  const cfg = gw.config.disagg;
  const exclude = excludedOf(ex);
  if (cfg.localPrefillBelow > 0) {
    const d = await gw.router.query({
      requestId: ex.requestId, tokens, model: ex.model, lora: ex.adapter, namespace: ex.namespace, phase: "decode", sessionId: ex.sessionId, exclude, target: targets.decode, overrides: ex.ext.overrides,
    });
    if (d.requestTokens - d.cachedTokens < cfg.localPrefillBelow) return { where: "local", reason: "small_uncached" };
  }
  try {
    const probe = await gw.router.prefillBusy({ requestId: ex.requestId, tokens, model: ex.model, lora: ex.adapter, namespace: ex.namespace, exclude }, cfg.prefillBusyFrac);
    if (probe.busy) return { where: "local", reason: "prefill_busy" };
  } catch (e) {
    if (isKvgateError(e) && e.code === "KVGATE_ERR_NO_WORKERS") return { where: "local", reason: "no_prefill_workers" };
    throw e;
  }
  return { where: "remote", reason: cfg.localPrefillBelow > 0 ? "uncached_tokens" : "unconditional" };
}
