/**
 * @module The prefill engine's side of a KV transfer: a finished prefill's blocks stay pinned until read or timed out,
 * within a bounded number of keys and waiters (docs/disaggregation.md#the-simulated-engines).
 */
import { KvgateError } from "../core/errors.ts";
import type { CancelTimer } from "./sim-clock.ts";
import type { SimEngine } from "./sim-engine.ts";

/** What a decode gets: the tokens whose KV it now holds (whole blocks). */
export interface TransferredKv {
  blockIds: number[];
  tokens: number[];
}

type Entry =
  | { state: "running" }
  | { state: "staged"; kv: TransferredKv; timer: CancelTimer }
  | { state: "failed"; reason: string; timer: CancelTimer };

export type TakeOutcome =
  | { kind: "taken"; kv: TransferredKv }
  | { kind: "failed"; reason: string }
  /** Nothing under the key (never staged, expired, or already read). */
  | { kind: "absent" };

export interface StagingStats {
  staged: number;
  taken: number;
  expired: number;
  failed: number;
}

export class KvStaging {
  readonly #entries = new Map<string, Entry>();
  readonly #waiters = new Map<string, Set<() => void>>();
  #waiting = 0;
  readonly stats: StagingStats = { staged: 0, taken: 0, expired: 0, failed: 0 };

  constructor(private readonly engine: SimEngine, private readonly timeoutMs: number, private readonly maxEntries = 4096, private readonly maxWaiters = 4096) {
    engine.onClose(() => this.close());
  }

  /** Blocks pinned for transfers not yet read. */
  get pinnedBlocks(): number {
    let n = 0;
    for (const e of this.#entries.values()) if (e.state === "staged") n += e.kv.blockIds.length;
    return n;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** A prefill for `key` started (SGLang room); a second one for a room in use is refused. */
  open(key: string): void {
    const e = this.#entries.get(key);
    if (e?.state === "running" || e?.state === "staged") throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `bootstrap room ${key} is already in use`, { param: "bootstrap_room" });
    if (e) this.#drop(key);
    this.#make(key, { state: "running" });
  }

  /**
   * Pins the cached leading blocks of a just-finished request's `prompt` under `key`; call it synchronously from the
   * engine's finish callback, before another step can evict them. Returns what was kept.
   */
  stage(key: string, prompt: ArrayLike<number>): TransferredKv {
    const blockIds = this.engine.pinPrefix(prompt);
    const tokens = Array.from({ length: blockIds.length * this.engine.options.blockSize }, (_, i) => prompt[i]!);
    const kv = { blockIds, tokens };
    this.#drop(key);
    this.#make(key, { state: "staged", kv, timer: this.engine.clock.setTimer(this.timeoutMs, () => this.#expire(key)) });
    this.#count("staged");
    return kv;
  }

  /** The prefill of `key` ended without KV (aborted, refused); a waiting or later reader learns why. */
  fail(key: string, reason: string): void {
    const e = this.#entries.get(key);
    if (e && e.state !== "running") return;
    this.#drop(key);
    this.#make(key, { state: "failed", reason, timer: this.engine.clock.setTimer(this.timeoutMs, () => this.#drop(key)) });
    this.#count("failed");
  }

  /** The KV kept under `key`, without taking it. */
  peek(key: string): TransferredKv | undefined {
    const e = this.#entries.get(key);
    return e?.state === "staged" ? e.kv : undefined;
  }

  /** Reads and releases the KV under `key` now (the vLLM decode's read after its prefill finished). */
  take(key: string): TakeOutcome {
    const e = this.#entries.get(key);
    if (!e || e.state === "running") return { kind: "absent" };
    if (e.state === "failed") return { kind: "failed", reason: e.reason };
    this.#drop(key, false);
    this.engine.unpin(e.kv.blockIds);
    this.#count("taken");
    return { kind: "taken", kv: e.kv };
  }

  /** Like take(), but waits up to `waitMs` for a prefill that has not arrived or not finished (SGLang decode). */
  async waitTake(key: string, waitMs: number, signal?: AbortSignal): Promise<TakeOutcome> {
    const now = this.take(key);
    if (now.kind !== "absent") return now;
    if (this.#waiting >= this.maxWaiters) throw new KvgateError("KVGATE_ERR_CAPACITY", `too many decodes waiting for their prefill (${this.maxWaiters})`);
    this.#waiting++;
    try {
      await new Promise<void>((resolve) => {
        let cancel: CancelTimer | undefined;
        const done = (): void => {
          cancel?.();
          signal?.removeEventListener("abort", done);
          this.#waiters.get(key)?.delete(done);
          if (this.#waiters.get(key)?.size === 0) this.#waiters.delete(key);
          resolve();
        };
        cancel = this.engine.clock.setTimer(waitMs, done);
        signal?.addEventListener("abort", done, { once: true });
        let set = this.#waiters.get(key);
        if (!set) this.#waiters.set(key, (set = new Set()));
        set.add(done);
      });
    } finally {
      this.#waiting--;
    }
    if (signal?.aborted) throw new KvgateError("KVGATE_ERR_CANCELLED", "the decode request went away");
    return this.take(key);
  }

  close(): void {
    for (const key of [...this.#entries.keys()]) this.#drop(key);
    for (const set of this.#waiters.values()) for (const w of [...set]) w();
  }

  #make(key: string, e: Entry): void {
    this.#entries.set(key, e);
    // Oldest first (Map order); a running prefill is never dropped, its request still owns it.
    for (const [k, old] of this.#entries) {
      if (this.#entries.size <= this.maxEntries) break;
      if (old.state !== "running" && k !== key) {
        if (old.state === "staged") this.#count("expired");
        this.#drop(k);
      }
    }
    if (e.state !== "running") for (const w of [...(this.#waiters.get(key) ?? [])]) w();
  }

  /** One more prefill KV `state`, in the stats and the engine's /metrics. */
  #count(state: keyof StagingStats): void {
    this.stats[state]++;
    this.engine.metrics.kvTransfer(state);
  }

  #expire(key: string): void {
    if (this.#entries.get(key)?.state !== "staged") return;
    this.#count("expired");
    this.#drop(key);
  }

  /** Forgets `key`, releasing its pinned blocks unless the caller takes them. */
  #drop(key: string, release = true): void {
    const e = this.#entries.get(key);
    if (!e) return;
    this.#entries.delete(key);
    if (e.state !== "running") e.timer();
    if (release && e.state === "staged") this.engine.unpin(e.kv.blockIds);
  }
}
