/**
 * @module The start-up every runtime adapter shares: config from argv, environment and file, `--help`, then the
 * gateway. Adapters keep only what truly differs (how to listen, read files, catch signals).
 */
import { isKvgateError } from "../core/errors.ts";
import { loadGatewayConfig } from "./config-load.ts";
import type { GatewayConfig } from "./config.ts";
import { createGateway, type Gateway, type GatewayHost } from "./gateway.ts";

export interface BootHost extends GatewayHost {
  argv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  /** Standard output (help text, the listening line). */
  write(text: string): void;
}

export type Booted = { kind: "help" } | { kind: "gateway"; gateway: Gateway; config: GatewayConfig };

export async function bootGateway(host: BootHost): Promise<Booted> {
  const loaded = await loadGatewayConfig({ argv: host.argv, env: host.env, readFile: host.readFile });
  if (loaded.kind === "help") {
    host.write(loaded.text);
    return { kind: "help" };
  }
  // The OTEL_* tracing variables come from the same environment the adapter read KVGATE_* from.
  return { kind: "gateway", gateway: await createGateway(loaded.config, { ...host, otelEnv: host.otelEnv ?? host.env }), config: loaded.config };
}

/** The line adapters print once listening; tests and scripts wait for it. */
export function listeningLine(host: string, port: number): string {
  const shown = host.includes(":") ? `[${host}]` : host === "0.0.0.0" ? "127.0.0.1" : host;
  return `kvgate listening on http://${shown}:${port}\n`;
}

/** A start-up failure as one line for stderr. */
export function bootFailure(e: unknown): string {
  return `kvgate: ${isKvgateError(e) ? `${e.message} (${e.code})` : String((e as Error)?.stack ?? e)}\n`;
}
