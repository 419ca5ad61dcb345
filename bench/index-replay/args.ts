/** @module The index bench's flags and the state its sections share (measurements and JSON results). */
import type { Measurement } from "../harness.ts";

export interface Args {
  trace?: string;
  workers: number;
  capacity: number;
  split: number;
  limit?: number;
  refLimit?: number;
  samples: number;
  quick: boolean;
}

export function parseArgs(argv: string[]): Args {
  const a: Args = { workers: 16, capacity: 4096, split: 8, samples: 15, quick: false };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]!;
    const v = (): string => {
      const x = argv[++i];
      if (x === undefined) throw new Error(`${k} needs a value`);
      return x;
    };
    const int = (): number => {
      const s = v();
      const n = Number(s);
      if (!Number.isInteger(n) || n <= 0) throw new Error(`${k} needs a positive integer, got ${s}`);
      return n;
    };
    switch (k) {
      case "--trace": a.trace = v(); break;
      case "--workers": a.workers = int(); break;
      case "--capacity": a.capacity = int(); break;
      case "--split": a.split = int(); break;
      case "--limit": a.limit = int(); break;
      case "--ref-limit": a.refLimit = int(); break;
      case "--samples": a.samples = int(); break;
      case "--quick": a.quick = true; break;
      default: throw new Error(`unknown flag ${k} (flags: --trace --workers --capacity --split --limit --ref-limit --samples --quick)`);
    }
  }
  if (a.quick) {
    a.samples = Math.min(a.samples, 7);
    a.refLimit ??= 1000;
  }
  return a;
}

/** Measurements by key; the named ones are always taken (the JSON's `measurements`), the route rows by block size. */
export type Measurements = Record<string, Measurement> & Record<
  "refReplay" | "wasmReplay" | "wasmReplayBatched" | "wasmReplaySmallCap" | "evBatchBig" | "evBatchReq" | "evApi" | "evBatchChunked" |
  "evApiChunked" | "evBatchBigSmallCap" | "evBatchChunkedSmallCap" | "copy" | "copyRaw", Measurement>;

/** What every section reads and adds to: flags, the core module, the log, the measurements and the JSON results. */
export interface Run {
  args: Args;
  module: WebAssembly.Module;
  /** Samples per measurement. */
  S: number;
  results: Record<string, unknown>;
  m: Measurements;
  log: (s?: string) => void;
}
