/**
 * @module What a replica keeps beside the live sync (issue 14): index snapshots for warm restarts, shared session
 * bindings and the shared worker registry, started in the order a restart needs: registry, snapshot, then sessions.
 */
import type { RegistryShare } from "./registry-share.ts";
import type { SessionShare } from "./session-share.ts";
import type { SnapshotKeeper } from "./snapshots.ts";

export class ReplicaState {
  constructor(readonly parts: { snapshots?: SnapshotKeeper; sessions?: SessionShare; registry?: RegistryShare }) {}

  /**
   * Once connected, before the event stream is read: the current registry (a snapshot's workers must be known to load
   * their entries), the newest snapshot, then the session bucket (newer than any snapshot). Returns the stream sequence covered.
   */
  async beforeReplay(): Promise<number> {
    const { snapshots, sessions, registry } = this.parts;
    if (registry) await registry.start();
    const seq = snapshots ? await snapshots.restore() : 0;
    sessions?.start();
    return seq;
  }

  booked(b: { sessionId?: string; worker: string; dpRank: number }): void {
    this.parts.sessions?.booked(b);
  }

  tick(now: number, streamSeq: number): void {
    this.parts.snapshots?.tick(now, streamSeq);
    this.parts.registry?.tick();
  }
}
