/**
 * @module PoolState, the Durable Object that holds one model pool's routing state on Workers — WASM index,
 * bookings, plans, sessions, fleet — as a whole kvgate gateway, so every isolate of the Worker routes with the
 * same view. The Worker entry asks it for decisions and sends it the reports, KV events and admin calls.
 */
import type { Gateway } from "../../gateway/gateway.ts";
import { LazyGateway } from "./env-boot.ts";

/** The part of the Durable Object state kvgate uses: alarms for housekeeping (nothing is stored). */
export interface DurableObjectState {
  storage: { setAlarm(at: number): Promise<void> };
}

export class PoolState {
  readonly #gateway = new LazyGateway();
  #alarmSet = false;

  constructor(private readonly state: DurableObjectState, private readonly env: Record<string, unknown>) {}

  async fetch(req: Request): Promise<Response> {
    const g = await this.#gateway.get(this.env);
    if (g instanceof Response) return g;
    const res = await g.fetch(req);
    await this.#schedule(g);
    return res;
  }

  /**
   * Housekeeping between requests (plan and booking expiry, health probes), which the requests alone would leave
   * undone while the pool is quiet; each alarm also keeps the object, and so its in-memory index, from being evicted.
   */
  async alarm(): Promise<void> {
    this.#alarmSet = false;
    const g = await this.#gateway.get(this.env);
    if (g instanceof Response) return;
    await g.tick();
    await this.#schedule(g);
  }

  /** One alarm at a time, and only while there is state to look after: an empty pool may sleep. */
  async #schedule(g: Gateway): Promise<void> {
    if (this.#alarmSet) return;
    const s = g.state;
    if (s.fleet.size === 0 && s.router.snapshot().openPlans === 0) return;
    this.#alarmSet = true;
    await this.state.storage.setAlarm(Date.now() + s.config.tickMs);
  }
}
