/**
 * @module Continuous batching in the style of vLLM V1: every step spends one token budget on the running
 * sequences first (decodes and unfinished prefill chunks, in admission order), then admits waiting sequences
 * FCFS while sequences, budget and KV blocks allow. A running sequence that cannot get a block preempts the most
 * recently admitted one (LIFO), which frees its blocks and goes back to the front of the queue to be recomputed.
 */
import type { BlockHasher } from "./block-hasher.ts";
import type { KvCache, CommitBlock } from "./kv-cache.ts";
import type { ResolvedSimOptions } from "./sim-options.ts";
import type { SimSequence } from "./sim-sequence.ts";
import type { StepShape } from "./perf-model.ts";

export interface ScheduledItem {
  seq: SimSequence;
  /** Tokens computed for this sequence in the step. */
  tokens: number;
  /** A one-token decode (rather than a prefill chunk). */
  decode: boolean;
}

export interface Admission {
  seq: SimSequence;
  /** Tokens of the sequence looked up in the prefix cache, and the tokens found (vLLM's prefix_cache_queries/hits). */
  queried: number;
  hit: number;
}

export interface StepPlan extends StepShape {
  items: ScheduledItem[];
  admissions: Admission[];
  preempted: SimSequence[];
}

type SchedulerOptions = Pick<ResolvedSimOptions, "blockSize" | "maxNumSeqs" | "maxNumBatchedTokens" | "enableChunkedPrefill">;

export class Scheduler {
  readonly waiting: SimSequence[] = [];
  readonly running: SimSequence[] = [];

  constructor(readonly options: SchedulerOptions, readonly cache: KvCache, readonly hasher: BlockHasher) {}

  #blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.options.blockSize);
  }

  add(seq: SimSequence): void {
    seq.status = "waiting";
    this.waiting.push(seq);
  }

  /** Takes a sequence out (finished or aborted) and releases its blocks. */
  remove(seq: SimSequence): void {
    if (seq.status === "running") {
      this.running.splice(this.running.indexOf(seq), 1);
      this.cache.release(seq.blockIds);
      seq.blockIds = [];
    } else if (seq.status === "waiting") {
      this.waiting.splice(this.waiting.indexOf(seq), 1);
    }
    seq.status = "finished";
  }

  get idle(): boolean {
    return this.running.length === 0 && this.waiting.length === 0;
  }

  schedule(): StepPlan {
    const plan: StepPlan = { items: [], admissions: [], preempted: [], prefillTokens: 0, decodes: 0, occupancy: 0 };
    let budget = this.options.maxNumBatchedTokens;
    for (let i = 0; i < this.running.length && budget > 0; i++) {
      const seq = this.running[i]!;
      const pending = seq.pending;
      if (pending === 0) continue; // scheduled in a step not yet sampled (only when driven by hand)
      if (pending > budget && !this.options.enableChunkedPrefill) continue;
      const n = Math.min(pending, budget);
      const need = this.#blocksFor(seq.numComputed + n) - seq.blockIds.length;
      while (this.cache.freeBlocks < need && this.running[this.running.length - 1] !== seq) {
        plan.preempted.push(this.#preempt(this.running[this.running.length - 1]!));
      }
      if (this.cache.freeBlocks < need) {
        plan.preempted.push(this.#preempt(seq));
        break;
      }
      seq.blockIds.push(...this.cache.allocate(need));
      this.#advance(plan, seq, n);
      budget -= n;
    }
    // As in vLLM, nothing new is admitted in a step that had to preempt.
    if (plan.preempted.length === 0) this.#admit(plan, budget);
    plan.occupancy = this.cache.usedBlocks / this.cache.numBlocks;
    return plan;
  }

  #admit(plan: StepPlan, budget: number): void {
    const bs = this.options.blockSize;
    while (this.waiting.length > 0 && this.running.length < this.options.maxNumSeqs && budget > 0) {
      const seq = this.waiting[0]!;
      const len = seq.tokens.length;
      // At least one token is always computed, so a fully cached prompt still recomputes its last block (vLLM).
      const maxHit = Math.floor((len - 1) / bs);
      let hits: number[] = [];
      if (this.cache.prefixCaching) {
        seq.ensureHashes(maxHit, this.hasher);
        hits = this.cache.matchPrefix(seq.hashes, maxHit);
      }
      // KV transferred from a remote prefill counts like a prefix hit, whole blocks only; it is never recomputed here.
      const external = Math.min(Math.floor(seq.externalTokens / bs), maxHit);
      const computed = Math.max(hits.length, external) * bs;
      if (len - computed > budget && !this.options.enableChunkedPrefill) break;
      const n = Math.min(len - computed, budget);
      const fresh = this.#blocksFor(computed + n) - hits.length;
      if (!this.cache.canAllocate(fresh, hits)) break;
      this.cache.acquire(hits);
      seq.blockIds = [...hits, ...this.cache.allocate(fresh)];
      seq.committed = hits.length;
      seq.numComputed = computed;
      if (seq.cachedTokens < 0) seq.cachedTokens = computed;
      // A preempted sequence lost the transferred KV with its blocks (unless they stay cached): it recomputes.
      seq.externalTokens = 0;
      this.waiting.shift();
      this.running.push(seq);
      seq.status = "running";
      plan.admissions.push({ seq, queried: len, hit: hits.length * bs });
      this.#advance(plan, seq, n);
      budget -= n;
    }
  }

  /** Schedules `n` tokens of `seq` and registers the blocks they complete (at schedule time, as vLLM does). */
  #advance(plan: StepPlan, seq: SimSequence, n: number): void {
    const decode = n === 1 && seq.outputLen > 0 && seq.pending === 1;
    plan.items.push({ seq, tokens: n, decode });
    if (decode) plan.decodes++;
    else plan.prefillTokens += n;
    seq.numComputed += n;
    this.#commit(seq);
  }

  #commit(seq: SimSequence): void {
    if (!this.cache.prefixCaching) return;
    const bs = this.options.blockSize;
    const full = Math.floor(seq.numComputed / bs);
    if (full <= seq.committed) return;
    seq.ensureHashes(full, this.hasher);
    const blocks: CommitBlock[] = [];
    for (let i = seq.committed; i < full; i++) {
      blocks.push({ id: seq.blockIds[i]!, hashes: seq.hashes[i]!, tokens: seq.tokens.slice(i * bs, (i + 1) * bs) });
    }
    const parent = seq.committed > 0 ? seq.hashes[seq.committed - 1]!.seq : null;
    const ids = this.cache.commit(parent, blocks, seq.salt);
    for (let k = 0; k < ids.length; k++) seq.blockIds[seq.committed + k] = ids[k]!;
    seq.committed = full;
  }

  #preempt(seq: SimSequence): SimSequence {
    this.running.splice(this.running.indexOf(seq), 1);
    this.cache.release(seq.blockIds);
    seq.blockIds = [];
    seq.committed = 0;
    seq.numComputed = 0;
    seq.preemptions++;
    seq.status = "waiting";
    this.waiting.unshift(seq);
    return seq;
  }
}
