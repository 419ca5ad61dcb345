/**
 * @module The bookings other router replicas hold, per peer, summed per (worker, rank) into the remote load the router
 * adds to its own; a peer that stops heartbeating loses them all. Bounded: at most maxPerPeer bookings per peer.
 * A booking that came with its prompt's hashes joins the rank's in-flight prompts instead of the block sum, so
 * prefixes it shares with local (or other remote) prompts are counted once, as a single router counts them.
 */
import type { RemoteLoad } from "../routing/rank-load.ts";
import type { BookingTuple } from "./sync-messages.ts";

interface RemoteBooking {
  worker: string;
  dpRank: number;
  prefillTokens: number;
  blocks: number;
  /** Decode blocks the booking expects to grow by: counted in the remote sum whether or not its prompt joined. */
  outputBlocks?: number;
  /** The prompt's sequence hashes, when the peer shared them. */
  keys?: Uint32Array;
  /** The keys are among the rank's in-flight prompts (so `blocks` is not in the remote sum). */
  joined?: boolean;
  /** Stops the router refreshing this prompt in its model of the rank (RemoteInflight). */
  untrack?: () => void;
}

/** Adds (`add`) or removes a remote prompt on a rank's in-flight prompts; false when the rank cannot take it. */
export type RemotePrompts = (worker: string, dpRank: number, keys: Uint32Array, blocks: number, add: boolean) => boolean;

/** Starts refreshing a remote in-flight prompt in approximate mode; returns what stops it (undefined: rank unknown). */
export type RemoteInflight = (worker: string, dpRank: number, keys: Uint32Array, blocks: number) => (() => void) | undefined;

interface Peer {
  lastSeen: number;
  bookings: Map<number, RemoteBooking>;
}

const rankKey = (worker: string, dpRank: number): string => `${dpRank}\u0000${worker}`;

export class RemoteBookings {
  readonly #peers = new Map<string, Peer>();
  readonly #totals = new Map<string, RemoteLoad & { worker: string; dpRank: number }>();
  #size = 0;
  /** Bookings refused because their peer already had maxPerPeer. */
  refused = 0;

  constructor(private readonly apply: (worker: string, dpRank: number, load: RemoteLoad) => void, private readonly maxPerPeer: number,
    private readonly maxPeers = 256, private readonly prompts?: RemotePrompts, private readonly inflight?: RemoteInflight) {}

  get size(): number {
    return this.#size;
  }

  get peers(): number {
    return this.#peers.size;
  }

  /** The peer is alive (any message from it). False when it is new and maxPeers are already known. */
  heard(peer: string, now: number): boolean {
    const p = this.#peers.get(peer);
    if (p) {
      p.lastSeen = now;
      return true;
    }
    if (this.#peers.size >= this.maxPeers) return false;
    this.#peers.set(peer, { lastSeen: now, bookings: new Map() });
    return true;
  }

  book(peer: string, id: number, b: RemoteBooking, now: number): boolean {
    if (!this.heard(peer, now)) return false;
    const p = this.#peers.get(peer)!;
    if (p.bookings.has(id)) return false;
    if (p.bookings.size >= this.maxPerPeer) {
      this.refused++;
      return false;
    }
    const own: RemoteBooking = { ...b };
    if (own.keys && own.blocks > 0 && this.prompts) own.joined = this.prompts(own.worker, own.dpRank, own.keys, own.blocks, true);
    if (own.keys && own.blocks > 0 && this.inflight) own.untrack = this.inflight(own.worker, own.dpRank, own.keys, own.blocks);
    p.bookings.set(id, own);
    this.#size++;
    this.#add(own, 1);
    return true;
  }

  prefillDone(peer: string, id: number): boolean {
    const b = this.#peers.get(peer)?.bookings.get(id);
    if (!b || b.prefillTokens === 0) return false;
    this.#add({ ...b, blocks: 0, outputBlocks: 0 }, 0, -b.prefillTokens);
    b.prefillTokens = 0;
    return true;
  }

  free(peer: string, id: number): boolean {
    const p = this.#peers.get(peer);
    const b = p?.bookings.get(id);
    if (!p || !b) return false;
    p.bookings.delete(id);
    this.#size--;
    if (b.joined) this.prompts!(b.worker, b.dpRank, b.keys!, b.blocks, false);
    b.untrack?.();
    this.#add(b, -1);
    return true;
  }

  /**
   * A heartbeat's full list replaces what was known of the peer (heals messages lost while NATS was down);
   * `outputBlocks[i]` belongs to `list[i]` (absent: none).
   */
  replace(peer: string, list: readonly BookingTuple[], now: number, outputBlocks?: readonly number[]): void {
    if (!this.heard(peer, now)) return;
    const p = this.#peers.get(peer)!;
    const keep = new Set(list.map((t) => t[0]));
    // Freed first, so bookings the heartbeat adds are not refused by the cap for ones it no longer lists.
    for (const id of [...p.bookings.keys()]) if (!keep.has(id)) this.free(peer, id);
    for (let i = 0; i < list.length; i++) {
      const [id, worker, dpRank, prefillTokens, blocks] = list[i]!;
      const known = p.bookings.get(id);
      if (!known) this.book(peer, id, { worker, dpRank, prefillTokens, blocks, outputBlocks: outputBlocks?.[i] ?? 0 }, now);
      else if (known.prefillTokens > 0 && prefillTokens === 0) this.prefillDone(peer, id);
    }
  }

  /** Drops every peer not heard from since `now - timeoutMs`, with its bookings; returns the peers dropped. */
  expire(now: number, timeoutMs: number): string[] {
    const gone: string[] = [];
    for (const [id, p] of this.#peers) {
      if (now - p.lastSeen <= timeoutMs) continue;
      for (const bid of [...p.bookings.keys()]) this.free(id, bid);
      this.#peers.delete(id);
      gone.push(id);
    }
    return gone;
  }

  #add(b: RemoteBooking, sign: number, prefill = sign * b.prefillTokens): void {
    const k = rankKey(b.worker, b.dpRank);
    let t = this.#totals.get(k);
    if (!t) this.#totals.set(k, (t = { worker: b.worker, dpRank: b.dpRank, requests: 0, prefillTokens: 0, blocks: 0 }));
    t.requests += sign;
    t.prefillTokens += prefill;
    t.blocks += sign * ((b.joined ? 0 : b.blocks) + (b.outputBlocks ?? 0));
    this.apply(t.worker, t.dpRank, { requests: t.requests, prefillTokens: t.prefillTokens, blocks: t.blocks });
    if (t.requests === 0) this.#totals.delete(k);
  }
}
