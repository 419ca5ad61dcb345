/**
 * @module The dashboard's copy of the stats time series: merges each incremental /v1/stats answer (`?since=` the
 * newest interval held, which is still open and so comes again) and drops intervals older than the window.
 */
import type { TimelineSeries } from "../../gateway/stats-timeline.ts";

type Column = keyof TimelineSeries;

const COLUMNS: readonly Column[] = [
  "t", "requests", "predicted_hit_rate", "reported_hit_rate", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms",
  "queue_depth_max", "rejected", "errors", "kv_events_per_s", "kv_gaps", "cold_streams",
];

export function emptySeries(): TimelineSeries {
  return Object.fromEntries(COLUMNS.map((c) => [c, []])) as unknown as TimelineSeries;
}

export class SeriesStore {
  #s: TimelineSeries = emptySeries();

  get series(): Readonly<TimelineSeries> {
    return this.#s;
  }

  /** Where the next poll starts: the newest interval held (it may have grown since), or undefined for everything. */
  get since(): number | undefined {
    return this.#s.t.at(-1);
  }

  /** Replaces what the update covers (from its first interval on), appends the rest, keeps only `windowMs` back from `now`. */
  merge(update: TimelineSeries, now: number, windowMs: number): void {
    const first = update.t[0];
    if (first !== undefined) {
      let keep = this.#s.t.findIndex((t) => t >= first);
      if (keep < 0) keep = this.#s.t.length;
      for (const c of COLUMNS) (this.#s[c] as unknown[]) = [...(this.#s[c] as unknown[]).slice(0, keep), ...(update[c] as unknown[])];
    }
    const cut = this.#s.t.findIndex((t) => t >= now - windowMs);
    if (cut > 0) for (const c of COLUMNS) (this.#s[c] as unknown[]) = (this.#s[c] as unknown[]).slice(cut);
    else if (cut < 0) this.#s = emptySeries();
  }

  /** Points with a value (not null) in a column: what a chart actually plots. */
  points(c: Column): number {
    return (this.#s[c] as (number | null)[]).filter((v) => v !== null).length;
  }
}
