/**
 * @module Turns the --nats options into a ReplicaSync over the host's NATS connection, or nothing when sharing is off;
 * apart from gateway.ts so the replica wiring stays one call there.
 */
import { KvgateError } from "../core/errors.ts";
import { ReplicaSync } from "../replicas/replica-sync.ts";
import { EVENTS_PREFIX, validReplicaId } from "../replicas/sync-messages.ts";
import type { GatewayConfig } from "./config.ts";
import type { SyncBusFactory } from "../replicas/sync-bus.ts";
import type { GatewayState } from "./gateway-state.ts";
import { replicaState } from "../replicas/replica-state-setup.ts";

function randomReplicaId(): string {
  const r = new Uint32Array(2);
  crypto.getRandomValues(r);
  return `r-${r[0]!.toString(36)}${r[1]!.toString(36)}`;
}

export function startReplicaSync(config: GatewayConfig, host: { syncBus?: SyncBusFactory; runtime?: string }, state: GatewayState): ReplicaSync | undefined {
  const o = config.sync;
  if (o.stateSharing === "off" || (o.stateSharing === "auto" && o.nats === "")) return undefined;
  if (o.nats === "") throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "--state-sharing on needs --nats nats://host:port");
  if (!host.syncBus) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${host.runtime ?? "this runtime"} cannot connect to NATS; run the replicas on Node or drop --nats`);
  }
  const replicaId = o.replicaId === "" ? randomReplicaId() : o.replicaId;
  if (!validReplicaId(replicaId)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--replica-id ${JSON.stringify(replicaId)}: use 1-64 letters, digits, - or _`);
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(o.stream)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--nats-stream ${JSON.stringify(o.stream)}: use letters, digits, - or _`);
  const warn = (m: string): void => state.log("warn", m);
  const bus = host.syncBus({
    servers: o.nats, name: `kvgate-${replicaId}`, stream: o.stream, streamSubjects: `${EVENTS_PREFIX}.>`,
    streamMaxAgeMs: o.streamMaxAgeMs, streamMaxMsgs: o.streamMaxMsgs, log: warn,
  });
  state.log("info", `replica ${replicaId}: sharing KV events, bookings and decisions over ${o.nats} (stream ${o.stream})`);
  const sync = new ReplicaSync({ bus, router: state.router, index: state.index, ingest: state.ingest, registry: state.metrics.registry, now: state.now, log: warn },
    { replicaId, heartbeatMs: o.heartbeatMs });
  sync.state = replicaState(bus, state, { replicaId, boot: sync.boot, bucketPrefix: o.stream, snapshotIntervalMs: o.snapshotIntervalMs });
  return sync;
}
