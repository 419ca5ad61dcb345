/** @module Replica gateways over one real nats-server for the warm-restart and shared-state tests, with the probes they use. */
import { natsBus } from "../../src/adapter/node/nats-bus.ts";
import type { SimServer } from "../../src/adapter/node/sim-server.ts";
import { encodeKvEventBatch } from "../../src/sim/kv-event-codec.ts";
import type { KvCacheEvent } from "../../src/sim/kv-events.ts";
import { ApproximateTokenizer } from "../../src/tokenize/index.ts";
import { post, startTestGateway, TOKEN, type TestGateway } from "../gateway/helpers.ts";
import type { NatsServer } from "./nats-server.ts";

export const MODEL = "kvgate-sim";

export function chatOf(text: string) {
  return { model: MODEL, messages: [{ role: "user", content: text.repeat(12) }] };
}

/** A Stored event of the chat's complete blocks under engine hashes base, base+1, … */
export function storedFor(chat: ReturnType<typeof chatOf>, base: bigint): { event: KvCacheEvent; blocks: number } {
  const tokens = Array.from(new ApproximateTokenizer().tokenizeChat(chat));
  const blocks = Math.floor(tokens.length / 16);
  const hashes = Array.from({ length: blocks }, (_, i) => base + BigInt(i));
  return { blocks, event: { type: "BlockStored", block_hashes: hashes, parent_block_hash: null, token_ids: tokens.slice(0, blocks * 16), block_size: 16, lora_id: null, medium: "GPU", lora_name: null } };
}

export async function until<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < end) {
    last = await probe();
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)}`);
}

export async function metric(g: TestGateway, line: string): Promise<number> {
  const text = await (await fetch(`${g.url}/metrics`)).text();
  const m = text.split("\n").find((l) => l.startsWith(`${line} `));
  return m === undefined ? NaN : Number(m.slice(line.length + 1));
}

export const auth = { authorization: `Bearer ${TOKEN}` };

export function ingest(g: TestGateway, worker: string, events: KvCacheEvent[], seq?: number): Promise<Response> {
  return fetch(`${g.url}/admin/kv-events`, {
    method: "POST", body: encodeKvEventBatch({ ts: 1, events, data_parallel_rank: null }) as Uint8Array<ArrayBuffer>,
    headers: { ...auth, "x-kvgate-worker": worker, ...(seq === undefined ? {} : { "x-kvgate-seq": String(seq) }) },
  });
}

export async function route(g: TestGateway, chat: unknown, headers: Record<string, string> = {}): Promise<{ worker: string; overlap_blocks: number }> {
  return (await (await post(`${g.url}/v1/route`, chat, headers)).json()) as { worker: string; overlap_blocks: number };
}

export async function workers(g: TestGateway): Promise<Record<string, string>> {
  const body = (await (await fetch(`${g.url}/admin/workers`, { headers: auth })).json()) as { data: { id: string; health: string }[] };
  return Object.fromEntries(body.data.map((w) => [w.id, w.health]));
}

export interface Replica {
  g: TestGateway;
  /** Stops ticking and closes the gateway (its NATS connection and HTTP server). */
  stop(): Promise<void>;
}

/** Replicas of one pool: each gets the sims as w1, w2, … (KV events on) and ticks every 25 ms. */
export class ReplicaPool {
  readonly #open = new Set<Replica>();
  constructor(private readonly nats: NatsServer, private readonly sims: SimServer[]) {}

  async start(id: string, extra: string[] = [], opts: { workers?: number; kvEvents?: boolean } = {}): Promise<Replica> {
    const kv = opts.kvEvents === false ? "" : ",kv_events=true";
    const ws = this.sims.slice(0, opts.workers ?? this.sims.length).flatMap((s, i) => ["--worker", `url=${s.url},id=w${i + 1},models=${MODEL}${kv}`]);
    const g = await startTestGateway(["--nats", this.nats.url, "--replica-id", id, "--replica-heartbeat-ms", "150", "--health-check-ms", "0", ...ws, ...extra],
      { syncBus: natsBus, runtime: "Node" });
    const timer = setInterval(() => void g.gateway.tick()?.catch(() => {}), 25);
    const r: Replica = {
      g,
      stop: async () => {
        clearInterval(timer);
        this.#open.delete(r);
        await g.gateway.close().catch(() => {});
        await g.close();
      },
    };
    this.#open.add(r);
    await until(`${id} connected`, () => metric(g, "kvgate_sync_connected"), (v) => v === 1);
    return r;
  }

  async closeAll(): Promise<void> {
    for (const r of [...this.#open]) await r.stop();
  }
}
