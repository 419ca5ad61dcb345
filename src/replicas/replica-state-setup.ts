/**
 * @module Builds a replica's ReplicaState from the gateway's parts and the bus: the buckets are named after the event
 * stream (one pool, one set), and each part exists only when the bus offers what it needs.
 */
import { ENTRY_RECORD_BYTES } from "../core/index-snapshot.ts";
import type { GatewayState } from "../gateway/gateway-state.ts";
import { RegistryShare } from "./registry-share.ts";
import { ReplicaState } from "./replica-state.ts";
import { SessionShare } from "./session-share.ts";
import { SnapshotKeeper } from "./snapshots.ts";
import type { SyncBus } from "./sync-bus.ts";

export interface ReplicaStateOptions {
  replicaId: string;
  boot: string;
  /** The event stream's name: buckets are <prefix>_SNAPSHOTS, <prefix>_SESSIONS, <prefix>_REGISTRY. */
  bucketPrefix: string;
  snapshotIntervalMs: number;
}

/** Upper bound of one replica's snapshot: every index entry, every session at its longest id, and the tables around them. */
export function snapshotBound(state: GatewayState): number {
  const rc = state.router.config;
  return state.index.options.capacity * ENTRY_RECORD_BYTES + rc.sessionMaxEntries * (4 * rc.sessionMaxIdBytes + 300) + (4 << 20);
}

export function replicaState(bus: SyncBus, state: GatewayState, o: ReplicaStateOptions): ReplicaState {
  const warn = (m: string): void => state.log("warn", m);
  const info = (m: string): void => state.log("info", m);
  const reg = state.metrics.registry;
  const rc = state.router.config;
  const maxBytes = snapshotBound(state);
  const snapshots = bus.objects && new SnapshotKeeper({
    objects: bus.objects(`${o.bucketPrefix}_SNAPSHOTS`, { maxBytes: -1 }), index: state.index, router: state.router, ingest: state.ingest,
    registry: reg, now: state.now, log: info,
  }, { replicaId: o.replicaId, intervalMs: o.snapshotIntervalMs, maxBytes });
  const sessions = bus.kv && rc.sessionTtlMs > 0 ? new SessionShare(
    bus.kv(`${o.bucketPrefix}_SESSIONS`, { ttlMs: rc.sessionTtlMs, maxValueBytes: 4 * rc.sessionMaxIdBytes + 1024 }), state.router, reg, state.now,
    { replicaId: o.replicaId, boot: o.boot, ttlMs: rc.sessionTtlMs, maxEntries: rc.sessionMaxEntries },
  ) : undefined;
  const registry = bus.kv && new RegistryShare({
    kv: bus.kv(`${o.bucketPrefix}_REGISTRY`, { ttlMs: 0, maxValueBytes: 64 << 10 }), fleet: state.fleet, health: state.health, ingest: state.ingest,
    registry: reg, log: warn,
  }, o.replicaId, o.boot);
  if (registry) state.adminChanges = registry;
  return new ReplicaState({ snapshots, sessions, registry });
}
