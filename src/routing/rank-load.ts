/** @module The live load of one (worker, data-parallel rank): the numbers the cost function and busy checks read. */
import { ActivePrompts } from "./active-prompts.ts";
import type { LoadTable } from "./load-table.ts";

/** What the engine itself last reported for this rank (its /metrics), next to the router's own accounting. */
export interface EngineReport {
  running: number;
  waiting: number;
  /** KV-cache usage 0..1, when the engine reports it. */
  kvUsage?: number;
  /** No successful scrape for too long: the numbers are old, and the rank counts as saturated. */
  stale: boolean;
}

/** Bookings other router replicas hold on this rank (src/replicas/), summed; kept apart from the local totals. */
export interface RemoteLoad {
  requests: number;
  prefillTokens: number;
  blocks: number;
}

const NO_REMOTE: RemoteLoad = Object.freeze({ requests: 0, prefillTokens: 0, blocks: 0 });

/**
 * Changed only through its methods (ActiveSequences books and frees, the router sets engine and peer load), so the
 * totals always equal the sum over live bookings (the property test checks it) and the rank's row in the load table,
 * which selection reads, is rewritten on every change. With KV reuse assumed, active blocks are distinct prompt blocks
 * (shared prefixes counted once); otherwise a plain sum.
 */
export class RankLoad {
  readonly #prompts = new ActivePrompts();
  #summedBlocks = 0;
  #activePrefillTokens = 0;
  #activeRequests = 0;
  #outputBlocks = 0;
  #engine: EngineReport | undefined = undefined;
  #engineBlocks = 0;
  #remote: RemoteLoad = NO_REMOTE;
  #table: LoadTable | undefined;

  /** @param table where selection reads this rank's load, at `slot`; without it nothing is mirrored (a detached load). */
  constructor(readonly assumeKvReuse: boolean, table?: LoadTable, private readonly slot = -1) {
    this.#table = table;
    this.#sync();
  }

  /** The in-flight prompts (read-only here: bookings and peers' prompts change them through this class). */
  get prompts(): Pick<ActivePrompts, "size" | "distinctBlocks"> {
    return this.#prompts;
  }
  /** Prompt blocks of live bookings, summed without dedupe (used when KV reuse is not assumed). */
  get summedBlocks(): number {
    return this.#summedBlocks;
  }
  get activePrefillTokens(): number {
    return this.#activePrefillTokens;
  }
  get activeRequests(): number {
    return this.#activeRequests;
  }
  /** Blocks the live bookings are expected to add while decoding (decode-aware load; 0 when it is off). */
  get outputBlocks(): number {
    return this.#outputBlocks;
  }
  /** The engine's own report (scraped /metrics), when the gateway scrapes it. */
  get engine(): EngineReport | undefined {
    return this.#engine;
  }
  /** KV blocks in use as the engine reports them (usage × capacity); 0 when unknown or stale. The cost takes the larger of this and activeBlocks. */
  get engineBlocks(): number {
    return this.#engineBlocks;
  }
  /** Other replicas' bookings here; the cost adds them to the local prefill and decode load. */
  get remote(): Readonly<RemoteLoad> {
    return this.#remote;
  }
  get activeBlocks(): number {
    return this.assumeKvReuse ? this.#prompts.distinctBlocks : this.#summedBlocks;
  }

  /** A booking joins; `keys` (its prompt's sequence hashes) only when KV reuse is assumed. */
  book(prefillTokens: number, blocks: number, outputBlocks: number, keys: Uint32Array | undefined): void {
    this.#activeRequests++;
    this.#activePrefillTokens += prefillTokens;
    this.#summedBlocks += blocks;
    this.#outputBlocks += outputBlocks;
    if (keys) this.#prompts.add(keys, blocks);
    this.#sync();
  }

  /** A booking's prompt is computed: its prefill tokens stop counting. */
  prefillDone(prefillTokens: number): void {
    this.#activePrefillTokens -= prefillTokens;
    this.#sync();
  }

  /** A booking leaves; `queuedPrefill` is what of its prefill still counted (0 once prefilled). Its prompt goes by removePrompt. */
  release(queuedPrefill: number, blocks: number, outputBlocks: number): void {
    this.#activeRequests--;
    this.#activePrefillTokens -= queuedPrefill;
    this.#summedBlocks -= blocks;
    this.#outputBlocks -= outputBlocks;
    this.#sync();
  }

  /** A prompt whose blocks count once beside the others (a peer's booking, or a local one through book). */
  addPrompt(keys: Uint32Array, blocks: number): void {
    this.#prompts.add(keys, blocks);
    this.#sync();
  }

  /** Removes the prompt added with these keys; false (and nothing changes) when it is not live. */
  removePrompt(keys: Uint32Array, blocks: number): boolean {
    if (!this.#prompts.remove(keys, blocks)) return false;
    this.#sync();
    return true;
  }

  setEngine(report: EngineReport | undefined, engineBlocks: number): void {
    this.#engine = report;
    this.#engineBlocks = engineBlocks;
    this.#sync();
  }

  setRemote(load: RemoteLoad): void {
    this.#remote = { requests: load.requests, prefillTokens: load.prefillTokens, blocks: load.blocks };
    this.#sync();
  }

  /** The rank left the fleet: its slot may go to another rank, so later frees of its bookings must not write there. */
  detach(): void {
    this.#table = undefined;
  }

  #sync(): void {
    if (this.#table === undefined) return;
    const remote = this.#remote;
    const own = this.activeBlocks + this.#outputBlocks + remote.blocks;
    this.#table.setLoad(this.slot, this.#activePrefillTokens + remote.prefillTokens,
      this.#engineBlocks > own ? this.#engineBlocks : own, this.#activeRequests > 0 || remote.requests > 0);
  }
}
