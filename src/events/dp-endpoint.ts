/** @module Where data-parallel rank r of an engine publishes its live and replay events (docs/kv-events.md#on-the-wire). */
import { KvgateError } from "../core/errors.ts";

export function endpointForRank(endpoint: string, rank: number): string {
  if (!Number.isInteger(rank) || rank < 0) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `bad dp rank ${rank}`);
  if (rank === 0) return endpoint;
  if (endpoint.startsWith("tcp://")) {
    const m = /^(tcp:\/\/.*):(\d+)$/.exec(endpoint);
    if (!m) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `tcp endpoint without a port: ${endpoint}`);
    const port = Number(m[2]) + rank;
    if (port > 65535) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${endpoint} + rank ${rank} is beyond port 65535`);
    return `${m[1]}:${port}`;
  }
  if (endpoint.startsWith("inproc://") || endpoint.startsWith("ipc://")) return `${endpoint}_dp${rank}`;
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `unsupported ZeroMQ endpoint ${endpoint}`);
}
