/**
 * @module The simulated engine: takes token prompts, runs them through the scheduler and KV cache one step at a
 * time on an injected clock, streams deterministic filler tokens back, and publishes the cache's KV events after
 * each step. Steps run back to back; when the engine is behind the clock (high speed-up), several run in one turn
 * so simulated throughput does not depend on timer resolution.
 */
import { createKvIndex } from "../core/create-kv-index.ts";
import { KvgateError } from "../core/errors.ts";
import { wasmBlockHasher, type BlockHasher } from "./block-hasher.ts";
import { KvCache } from "./kv-cache.ts";
import type { KvEventSink } from "./kv-event-sink.ts";
import { stepMs } from "./perf-model.ts";
import { Scheduler, type StepPlan } from "./scheduler.ts";
import { realClock, unixSeconds, type CancelTimer, type SimClock } from "./sim-clock.ts";
import { SimMetrics } from "./sim-metrics.ts";
import { resolveSimOptions, type ResolvedSimOptions, type SimEngineOptions } from "./sim-options.ts";
import { SimSequence } from "./sim-sequence.ts";
import { fillerToken } from "./sim-tokenizer.ts";

export interface SimRequest {
  /** Unique among live requests; generated when absent. */
  id?: string;
  prompt: ArrayLike<number>;
  /** Tokens to generate (the sim never stops early); default `defaultMaxTokens`. */
  maxTokens?: number;
  /** Leading prompt tokens whose KV a remote prefill computed (disaggregated serving): cached, not recomputed. */
  externalTokens?: number;
  /** LoRA adapter (one of the engine's loraAdapters) and cache_salt: they key the request's blocks, as in vLLM. */
  lora?: string;
  cacheSalt?: string;
}

export type FinishReason = "length" | "abort";

export interface SimResult {
  id: string;
  reason: FinishReason;
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens whose KV came from the prefix cache (whole blocks) at first admission. */
  cachedTokens: number;
  /** Generated token ids. */
  tokens: number[];
  arrival: number;
  firstTokenAt?: number;
  finishedAt: number;
  preemptions: number;
}

export interface SimListener {
  onToken?(token: number, index: number, time: number): void;
  onFinish?(result: SimResult): void;
}

export interface SimHandle {
  readonly id: string;
  readonly promptTokens: number;
  /** Prompt tokens served from the prefix cache (0 until the request is first scheduled). */
  readonly cachedTokens: number;
  readonly result: Promise<SimResult>;
  abort(): void;
}

export interface SimEngineDeps {
  hasher: BlockHasher;
  clock?: SimClock;
  sinks?: KvEventSink[];
}

/** Steps run in one turn at most when behind the clock, so I/O is never starved. */
const MAX_BURST = 64;

export class SimEngine {
  readonly options: ResolvedSimOptions;
  readonly cache: KvCache;
  readonly metrics: SimMetrics;
  readonly clock: SimClock;
  readonly sinks: KvEventSink[];
  readonly #scheduler: Scheduler;
  readonly #live = new Map<string, { seq: SimSequence; listener: SimListener; resolve: (r: SimResult) => void }>();
  #timer: CancelTimer | undefined;
  #engineTime = -Infinity;
  /** The next step follows the previous one directly (no idle gap), so it starts at the previous step's end. */
  #chained = false;
  #nextId = 0;
  #closed = false;
  readonly #closeHooks: (() => void)[] = [];
  steps = 0;

  constructor(options: SimEngineOptions, deps: SimEngineDeps) {
    this.options = resolveSimOptions(options);
    if (deps.hasher.blockSize !== this.options.blockSize) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `hasher block size ${deps.hasher.blockSize} ≠ engine block size ${this.options.blockSize}`);
    }
    this.clock = deps.clock ?? realClock();
    this.sinks = deps.sinks ?? [];
    this.cache = new KvCache(this.options.numGpuBlocks, this.options.blockSize, this.options.enablePrefixCaching);
    this.#scheduler = new Scheduler(this.options, this.cache, deps.hasher);
    this.metrics = new SimMetrics(this.options.model, this.options.dpRank);
  }

  get running(): number {
    return this.#scheduler.running.length;
  }

  get waiting(): number {
    return this.#scheduler.waiting.length;
  }

  get idle(): boolean {
    return this.#scheduler.idle;
  }

  /** Checks a request against the engine's limits; throws a KvgateError (status 400) when it can never run. */
  validate(promptLen: number, maxTokens: number): void {
    const o = this.options;
    if (promptLen < 1) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "the prompt is empty");
    if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `max_tokens must be a positive integer, got ${maxTokens}`);
    if (promptLen + maxTokens > o.maxModelLen) {
      throw new KvgateError("KVGATE_ERR_PROMPT_TOO_LONG", `This model's maximum context length is ${o.maxModelLen} tokens. However, you requested ${promptLen + maxTokens} tokens (${promptLen} in the messages, ${maxTokens} in the completion).`);
    }
    // The last sampled token is never written to the cache, hence the −1.
    if (Math.ceil((promptLen + maxTokens - 1) / o.blockSize) > o.numGpuBlocks) {
      throw new KvgateError("KVGATE_ERR_PROMPT_TOO_LONG", `the request needs more KV blocks than the engine's ${o.numGpuBlocks}`);
    }
  }

  submit(req: SimRequest, listener: SimListener = {}): SimHandle {
    if (this.#closed) throw new KvgateError("KVGATE_ERR_STATE", "the engine is closed");
    const maxTokens = req.maxTokens ?? this.options.defaultMaxTokens;
    this.validate(req.prompt.length, maxTokens);
    for (let i = 0; i < req.prompt.length; i++) {
      const t = req.prompt[i]!;
      if (!Number.isInteger(t) || t < 0 || t > 0xffffffff) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `token ${i} is not an integer in 0..4294967295`);
    }
    const id = req.id ?? `${this.options.workerId}-${(this.#nextId++).toString(16)}`;
    if (this.#live.has(id)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `request id ${id} is already running`);
    if (req.lora !== undefined && !this.options.loraAdapters.includes(req.lora)) {
      throw new KvgateError("KVGATE_ERR_UNKNOWN_MODEL", `The model \`${req.lora}\` does not exist.`, { param: "model" });
    }
    const salt = { lora: req.lora, cacheSalt: req.cacheSalt };
    const hashes = this.options.enablePrefixCaching ? this.#scheduler.hasher.hashBlocks(req.prompt, salt) : [];
    const seq = new SimSequence(id, req.prompt, maxTokens, this.clock.now(), hashes, salt);
    seq.externalTokens = Math.max(0, Math.min(req.externalTokens ?? 0, seq.promptLen));
    let resolve!: (r: SimResult) => void;
    const result = new Promise<SimResult>((r) => (resolve = r));
    this.#live.set(id, { seq, listener, resolve });
    this.#scheduler.add(seq);
    this.#kick();
    return {
      id, promptTokens: seq.promptLen, result, abort: () => this.abort(id),
      get cachedTokens() {
        return Math.max(0, seq.cachedTokens);
      },
    };
  }

  /** Cancels a request and frees its blocks at once; false when it is not live. */
  abort(id: string): boolean {
    const live = this.#live.get(id);
    if (!live) return false;
    this.#scheduler.remove(live.seq);
    this.#finish(live.seq, "abort", this.clock.now());
    return true;
  }

  /** Fault injection (replay's fault runs): forgets the whole prefix cache without a KV event; returns blocks lost. */
  loseCacheSilently(): number {
    return this.cache.loseSilently();
  }

  /** vLLM's reset_prefix_cache: refused (false) while any request holds blocks. */
  resetPrefixCache(): boolean {
    if (!this.#scheduler.idle || !this.cache.reset()) return false;
    this.#publish(this.clock.now());
    return true;
  }

  /**
   * Takes a reference on the cached complete blocks of `prompt`, leading ones only, so they survive eviction (a
   * prefill worker keeps a finished request's KV until a remote decode has read it). Returns the block ids.
   */
  pinPrefix(prompt: ArrayLike<number>): number[] {
    if (this.#closed) return [];
    const ids = this.cache.matchPrefix(this.#scheduler.hasher.hashBlocks(prompt), Math.floor(prompt.length / this.options.blockSize));
    this.cache.acquire(ids);
    return ids;
  }

  /** Gives back references taken by pinPrefix; requests waiting for blocks may now fit. */
  unpin(ids: readonly number[]): void {
    if (this.#closed || ids.length === 0) return;
    this.cache.release(ids);
    this.#kick();
  }

  /** Runs `fn` when the engine closes (extensions release what they hold and stop their timers). */
  onClose(fn: () => void): void {
    this.#closeHooks.push(fn);
  }

  /** Stops stepping, aborts live requests and closes the sinks. */
  async close(): Promise<void> {
    if (this.#closed) return;
    for (const fn of this.#closeHooks.splice(0)) safely(fn);
    this.#timer?.();
    this.#timer = undefined;
    for (const id of [...this.#live.keys()]) this.abort(id);
    this.#closed = true;
    this.#publish(this.clock.now());
    await Promise.all(this.sinks.map((s) => s.close()));
  }

  #kick(): void {
    if (this.#timer || this.#closed) return;
    this.#timer = this.clock.setTimer(0, () => {
      this.#timer = undefined;
      this.#run();
    });
  }

  #run(): void {
    for (let burst = 0; burst < MAX_BURST; burst++) {
      const plan = this.#scheduler.schedule();
      for (const a of plan.admissions) this.metrics.admitted(a.queried, a.hit);
      for (let i = 0; i < plan.preempted.length; i++) this.metrics.preempted();
      if (plan.items.length === 0) {
        this.#publish(this.clock.now());
        if (plan.preempted.length > 0) continue; // a sequence preempted itself; the next schedule readmits
        this.#chained = false;
        return;
      }
      // Back-to-back steps start where the previous one ended, not when its timer happened to fire, so timer
      // lateness becomes a debt that the synchronous path below pays back instead of slowing the simulation.
      const start = this.#chained ? this.#engineTime : Math.max(this.clock.now(), this.#engineTime);
      const end = start + stepMs(plan, this.options);
      this.#engineTime = end;
      const delay = end - this.clock.now();
      if (delay > 0) {
        this.#timer = this.clock.setTimer(delay, () => {
          this.#timer = undefined;
          this.#complete(plan, end);
          this.#chained = true;
          if (!this.#closed) this.#run();
        });
        return;
      }
      this.#complete(plan, end);
      this.#chained = true;
    }
    this.#kick();
  }

  #complete(plan: StepPlan, end: number): void {
    this.steps++;
    this.metrics.step(plan.items.reduce((n, it) => n + it.tokens, 0));
    for (const { seq } of plan.items) {
      if (seq.status !== "running" || seq.pending !== 0) continue;
      const index = seq.outputLen;
      const token = fillerToken(index);
      seq.tokens.push(token);
      this.metrics.token(index === 0, end - (seq.lastTokenAt ?? seq.arrival), seq.promptLen);
      seq.firstTokenAt ??= end;
      seq.lastTokenAt = end;
      const live = this.#live.get(seq.id)!;
      safely(() => live.listener.onToken?.(token, index, end));
      if (seq.outputLen >= seq.maxTokens) {
        this.#scheduler.remove(seq);
        this.#finish(seq, "length", end);
      }
    }
    this.#publish(end);
  }

  #finish(seq: SimSequence, reason: FinishReason, at: number): void {
    const live = this.#live.get(seq.id)!;
    this.#live.delete(seq.id);
    const result: SimResult = {
      id: seq.id, reason, promptTokens: seq.promptLen, completionTokens: seq.outputLen,
      cachedTokens: Math.max(0, seq.cachedTokens), tokens: seq.tokens.slice(seq.promptLen), arrival: seq.arrival,
      firstTokenAt: seq.firstTokenAt, finishedAt: at, preemptions: seq.preemptions,
    };
    this.metrics.finished(reason, at - seq.arrival);
    safely(() => live.listener.onFinish?.(result));
    live.resolve(result);
  }

  #publish(atMs: number): void {
    const events = this.cache.drainEvents();
    if (events.length === 0) return;
    const ts = unixSeconds(this.clock, atMs);
    for (const sink of this.sinks) safely(() => sink.publish(events, ts));
  }

  /** Prometheus text (vLLM names). */
  renderMetrics(): string {
    return this.metrics.render({ running: this.running, waiting: this.waiting, kvUsage: this.cache.usage() });
  }
}

/** A listener or sink that throws must not stop the engine. */
function safely(fn: () => void): void {
  try {
    fn();
  } catch {
    // Deliberately ignored: the caller's bug, not the engine's state.
  }
}

/** An engine with the WASM core's hashing (the router's exact hash), on the real clock unless one is given. */
export async function createSimEngine(options: SimEngineOptions = {}, deps: Partial<SimEngineDeps> = {}): Promise<SimEngine> {
  const blockSize = resolveSimOptions(options).blockSize;
  const hasher = deps.hasher ?? wasmBlockHasher(await createKvIndex({ capacity: 1024, maxSlots: 1 }), blockSize);
  return new SimEngine(options, { ...deps, hasher });
}
