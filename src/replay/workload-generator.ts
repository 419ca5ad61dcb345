/**
 * @module The built-in workload used when no trace is given, so a newcomer can replay at once: seeded multi-turn
 * chat conversations and agent loops. Conversations share a few system prompts (popular ones more often); agent
 * loops share a system prompt and one of a few tool-definition blocks, then grow by tool calls and tool results.
 * Each turn's prompt is the previous prompt plus the previous answer plus the new message, so turns of a session
 * share a growing prefix, and sessions share their system and tool prefixes.
 */
import { KvgateError } from "../core/errors.ts";
import { seededRandom, type Random } from "../core/seeded-random.ts";
import type { ReplayRequest, Segment } from "./replay-request.ts";

export interface GeneratorOptions {
  /** Requests produced (the earliest ones of the generated sessions). Default 400. */
  requests?: number;
  /** New sessions per second of trace time (Poisson). Default 2. */
  sessionsPerSec?: number;
  /** Share of sessions that are agent loops rather than chats. Default 0.4. */
  agentShare?: number;
  seed?: number;
}

export const GENERATOR_DEFAULTS: Required<GeneratorOptions> = { requests: 400, sessionsPerSec: 2, agentShare: 0.4, seed: 42 };

const SYSTEM_PROMPTS = 6;
const TOOLSETS = 4;

interface Shared {
  systems: Segment[];
  toolsets: Segment[];
}

class Builder {
  #nextId = 1;
  readonly out: ReplayRequest[] = [];

  constructor(readonly rnd: Random) {}

  segment(length: number): Segment {
    return { id: this.#nextId++, length };
  }

  /** Uniform integer in [lo, hi]. */
  between(lo: number, hi: number): number {
    return lo + this.rnd.int(hi - lo + 1);
  }

  /** Index in [0, n) with weight 1/(k+1): a few shared prefixes are much more popular than the rest. */
  zipf(n: number): number {
    let total = 0;
    for (let k = 0; k < n; k++) total += 1 / (k + 1);
    let x = this.rnd.next() * total;
    for (let k = 0; k < n; k++) if ((x -= 1 / (k + 1)) < 0) return k;
    return n - 1;
  }

  emit(at: number, prefix: readonly Segment[], outputLength: number, session: string): void {
    const segments = prefix.slice();
    const inputLength = segments.reduce((n, s) => n + s.length, 0);
    this.out.push({ index: -1, at, inputLength, outputLength, segments, session });
  }
}

function chat(b: Builder, shared: Shared, start: number, name: string): void {
  const history: Segment[] = [shared.systems[b.zipf(SYSTEM_PROMPTS)]!];
  const turns = b.between(2, 8);
  let at = start;
  for (let t = 0; t < turns; t++) {
    // Half the conversations open with a pasted document (RAG, code review): per-session context worth caching.
    history.push(b.segment(t === 0 && b.rnd.next() < 0.5 ? b.between(1_000, 8_000) : b.between(30, 400)));
    const output = b.between(40, 400);
    b.emit(at, history, output, name);
    history.push(b.segment(output));
    // The user reads the answer and types: think time plus a rough generation time.
    at += b.between(4_000, 25_000) + output * 30;
  }
}

function agent(b: Builder, shared: Shared, start: number, name: string): void {
  const history: Segment[] = [shared.systems[b.zipf(2)]!, shared.toolsets[b.zipf(TOOLSETS)]!, b.segment(b.between(300, 3_000))];
  const steps = b.between(4, 16);
  let at = start;
  for (let s = 0; s < steps; s++) {
    const output = b.between(20, 220);
    b.emit(at, history, output, name);
    history.push(b.segment(output), b.segment(b.between(200, 4_000)));
    // Tool execution is quick: the next call follows the result within seconds.
    at += b.between(400, 3_000) + output * 30;
  }
}

/** A deterministic workload: the same options always give the same requests. */
export function generateWorkload(options: GeneratorOptions = {}): ReplayRequest[] {
  const o = { ...GENERATOR_DEFAULTS, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) };
  if (!Number.isInteger(o.requests) || o.requests < 1) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `requests must be a positive integer, got ${o.requests}`);
  if (!(o.sessionsPerSec > 0)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `sessionsPerSec must be positive, got ${o.sessionsPerSec}`);
  if (!(o.agentShare >= 0 && o.agentShare <= 1)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `agentShare must be in 0..1, got ${o.agentShare}`);
  const b = new Builder(seededRandom(o.seed));
  const shared: Shared = {
    systems: Array.from({ length: SYSTEM_PROMPTS }, () => b.segment(b.between(800, 3_000))),
    toolsets: Array.from({ length: TOOLSETS }, () => b.segment(b.between(2_000, 6_000))),
  };
  let t = 0;
  // Sessions start until enough requests exist that start before the next session would.
  for (let n = 0; ; n++) {
    t += (-Math.log(1 - b.rnd.next()) / o.sessionsPerSec) * 1000;
    const early = b.out.filter((r) => r.at <= t).length;
    if (early >= o.requests) break;
    if (b.rnd.next() < o.agentShare) agent(b, shared, t, `agent-${n}`);
    else chat(b, shared, t, `chat-${n}`);
  }
  const sorted = b.out.map((r, i) => ({ r, i })).sort((x, y) => x.r.at - y.r.at || x.i - y.i).slice(0, o.requests);
  return sorted.map(({ r }, index) => ({ ...r, at: Math.round(r.at), index }));
}
