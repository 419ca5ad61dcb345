/** @module The benchmarks `npm run bench` knows, each loaded on demand (one broken bench does not stop the others). */
export interface BenchModule {
  main(args: string[]): Promise<void>;
}

export const BENCHES: Record<string, { about: string; load: () => Promise<BenchModule> }> = {
  index: {
    about: "replay of the Mooncake synthetic trace as KV events + find_matches: WASM vs TS reference, event ingestion, 8k-token route cost",
    load: () => import("./index-replay.ts"),
  },
  events: {
    about: "engine KV-event batches (vLLM msgpack, both encodings) decoded and applied, ZeroMQ to index, vs the core's raw apply rate",
    load: () => import("./events.ts"),
  },
  select: {
    about: "routing engine selection per 8k-token request (hash + match + score + booking) over 16, 64 and 256 workers (issue 3)",
    load: () => import("./select.ts"),
  },
  tokenize: {
    about: "prompt tokenization (Qwen3 precise and approximate) at 1k and 8k tokens",
    load: () => import("./tokenize.ts"),
  },
  zmtp: {
    about: "kvgate's ZMTP client vs the native zeromq module on Node: engine KV events received (and applied) per cycle",
    load: () => import("./zmtp.ts"),
  },
  embed: {
    about: "the C host (libkvgate, wasm2c) vs the JS host: vLLM batch apply, binary batch apply, find_matches; JS / C ratios (issue 15)",
    load: () => import("./embed.ts"),
  },
  snapshot: {
    about: "warm-restart snapshots: index dump, seal, decode and load vs rebuilding the index from the same KV events (issue 14)",
    load: () => import("./snapshot.ts"),
  },
  replicas: {
    about: "router replicas over NATS (issue 14): hit rate and p99 TTFT through 1/2/4 replicas vs 1, kill one of 3, NATS outage divergence, sharing cost in requests/s",
    load: () => import("./replicas.ts"),
  },
  gateway: {
    about: "kvgate in front of one simulated worker, on Node and Bun: added latency and throughput vs direct (issue 4)",
    load: () => import("./gateway.ts"),
  },
  dashboard: {
    about: "gateway throughput while /v1/stats is polled at the dashboard's rate and while the real page is open in headless Chromium, vs nobody watching (issue 17)",
    load: () => import("./dashboard.ts"),
  },
};
