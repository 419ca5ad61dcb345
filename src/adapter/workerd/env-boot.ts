/**
 * @module What the Worker entry and the pool object share: the Workers env as KVGATE_* strings, and the gateway
 * booted from it (built on first use, because Workers forbid random values and timers at module scope).
 */
import { bootFailure, bootGateway } from "../../gateway/boot.ts";
import type { Gateway } from "../../gateway/gateway.ts";
import { errorResponse } from "../../gateway/http-errors.ts";
import { KvgateError } from "../../core/errors.ts";

export interface ExecutionContext {
  waitUntil(p: Promise<unknown>): void;
  passThroughOnException(): void;
}

/** The env's string values (vars and secrets); bindings (objects) are left out. */
export function envStrings(env: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => typeof e[1] === "string"));
}

/** Boots one gateway on first use and again after a failed boot, which answers as an OpenAI error. */
export class LazyGateway {
  #booting: Promise<Gateway> | undefined;

  async get(env: Record<string, unknown>): Promise<Gateway | Response> {
    this.#booting ??= boot(env);
    try {
      return await this.#booting;
    } catch (e) {
      this.#booting = undefined;
      console.error(bootFailure(e).trimEnd());
      return errorResponse(e instanceof KvgateError ? e : new KvgateError("KVGATE_ERR_STATE", String((e as Error)?.message ?? e)));
    }
  }
}

async function boot(env: Record<string, unknown>): Promise<Gateway> {
  const b = await bootGateway({ argv: [], env: envStrings(env), write: (t) => console.log(t.trimEnd()), runtime: "Cloudflare Workers", dropsGoneClients: true });
  if (b.kind !== "gateway") throw new KvgateError("KVGATE_ERR_STATE", "no gateway configured");
  return b.gateway;
}
