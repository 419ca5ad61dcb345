/** @module The entry of every proxied request: an aggregated one is one leg, a disaggregated one a prefill and a decode leg. */
import { servesDisaggregated } from "./disagg-decide.ts";
import { dispatchDisaggregated } from "./disagg-dispatch.ts";
import { dispatchLeg, requestLeg, type Budget, type Dispatched } from "./dispatch-leg.ts";
import type { Exchange, GatewayState } from "./gateway-state.ts";

/**
 * Books a worker and sends `bodyText` to it. Resolves with the first attempt that got response headers and is
 * not worth retrying (a 2xx, or a 4xx the client must see); rejects with a KvgateError otherwise (429 queue,
 * 503 no worker, 502/504 when the last worker failed, 499 when the client left).
 */
export function dispatch(gw: GatewayState, ex: Exchange, tokens: Uint32Array, bodyText: string, budget: Budget): Promise<Dispatched> {
  if (servesDisaggregated(gw, ex.model)) return dispatchDisaggregated(gw, ex, tokens, bodyText, budget);
  return dispatchLeg(gw, ex, tokens, bodyText, budget, requestLeg(ex));
}
