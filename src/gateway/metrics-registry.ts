/**
 * @module Prometheus text-format counters, gauges and histograms with labels. Written here because prom-client
 * depends on Node's process and cluster modules and so does not run on Workers, Deno or Bun unchanged.
 */

type Labels = Record<string, string | number>;

/** Values that need no escaping are the rule: test once instead of running three replacements on each. */
const NEEDS_ESCAPE = /[\\\n"]/;

/**
 * Formatted label sets, per process: a request observes a dozen series whose labels repeat. Found by walking a trie
 * of Maps keyed by each label's name and then its value, so a hit builds no string (building a lookup key cost more
 * than the lookup, most of all on JavaScriptCore).
 */
interface KeyNode {
  key?: string;
  next?: Map<string, Map<string, KeyNode>>;
}
let keyRoot: KeyNode = {};
let keyNodes = 0;
/** Trie nodes kept; past it the cache starts over (label values are bounded in practice). */
const KEY_CACHE_MAX = 4096;
/** Longer label values are formatted every time rather than kept. */
const MAX_CACHED_VALUE = 256;

function labelKey(labels: Labels | undefined): string {
  if (!labels) return "";
  let node = keyRoot;
  for (const k in labels) {
    const raw = labels[k]!;
    const v = typeof raw === "string" ? raw : String(raw);
    if (v.length > MAX_CACHED_VALUE) return formatLabels(labels);
    const byName = (node.next ??= new Map());
    let byValue = byName.get(k);
    if (byValue === undefined) byName.set(k, (byValue = new Map()));
    let child = byValue.get(v);
    if (child === undefined) {
      if (++keyNodes > KEY_CACHE_MAX) {
        keyRoot = {};
        keyNodes = 0;
        return formatLabels(labels);
      }
      byValue.set(v, (child = {}));
    }
    node = child;
  }
  return (node.key ??= formatLabels(labels));
}

function formatLabels(labels: Labels): string {
  const keys = Object.keys(labels).sort();
  return keys.map((k) => `${k}="${escapeLabel(String(labels[k]))}"`).join(",");
}

function escapeLabel(v: string): string {
  if (!NEEDS_ESCAPE.test(v)) return v;
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function fmt(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

abstract class Metric {
  constructor(readonly name: string, readonly help: string, readonly type: "counter" | "gauge" | "histogram") {}
  abstract render(): string[];
  header(): string[] {
    return [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} ${this.type}`];
  }
}

export class Counter extends Metric {
  readonly #values = new Map<string, number>();
  constructor(name: string, help: string) {
    super(name, help, "counter");
  }
  inc(labels?: Labels, by = 1): void {
    const k = labelKey(labels);
    this.#values.set(k, (this.#values.get(k) ?? 0) + by);
  }
  get(labels?: Labels): number {
    return this.#values.get(labelKey(labels)) ?? 0;
  }
  render(): string[] {
    return [...this.#values].map(([k, v]) => `${this.name}${k ? `{${k}}` : ""} ${fmt(v)}`);
  }
}

export class Gauge extends Metric {
  readonly #values = new Map<string, number>();
  constructor(name: string, help: string) {
    super(name, help, "gauge");
  }
  set(labels: Labels | undefined, v: number): void {
    this.#values.set(labelKey(labels), v);
  }
  delete(labels: Labels): void {
    this.#values.delete(labelKey(labels));
  }
  /** Replaces every series at once (for gauges computed from a snapshot, such as per-worker load). */
  reset(): void {
    this.#values.clear();
  }
  get(labels?: Labels): number | undefined {
    return this.#values.get(labelKey(labels));
  }
  render(): string[] {
    return [...this.#values].map(([k, v]) => `${this.name}${k ? `{${k}}` : ""} ${fmt(v)}`);
  }
}

export class Histogram extends Metric {
  readonly #series = new Map<string, { counts: number[]; sum: number; count: number }>();
  constructor(name: string, help: string, readonly buckets: readonly number[]) {
    super(name, help, "histogram");
  }
  observe(labels: Labels | undefined, v: number): void {
    const k = labelKey(labels);
    let s = this.#series.get(k);
    if (!s) {
      s = { counts: new Array(this.buckets.length).fill(0), sum: 0, count: 0 };
      this.#series.set(k, s);
    }
    for (let i = 0; i < this.buckets.length; i++) if (v <= this.buckets[i]!) s.counts[i]!++;
    s.sum += v;
    s.count++;
  }
  count(labels?: Labels): number {
    return this.#series.get(labelKey(labels))?.count ?? 0;
  }
  sum(labels?: Labels): number {
    return this.#series.get(labelKey(labels))?.sum ?? 0;
  }
  render(): string[] {
    const out: string[] = [];
    for (const [k, s] of this.#series) {
      const sep = k ? `${k},` : "";
      this.buckets.forEach((b, i) => out.push(`${this.name}_bucket{${sep}le="${fmt(b)}"} ${s.counts[i]}`));
      out.push(`${this.name}_bucket{${sep}le="+Inf"} ${s.count}`);
      out.push(`${this.name}_sum${k ? `{${k}}` : ""} ${fmt(s.sum)}`);
      out.push(`${this.name}_count${k ? `{${k}}` : ""} ${s.count}`);
    }
    return out;
  }
}

/** Exponential bucket bounds: start, start·factor, … (count of them). */
export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => Number((start * factor ** i).toPrecision(6)));
}

export class MetricsRegistry {
  readonly #metrics: Metric[] = [];

  counter(name: string, help: string): Counter {
    return this.#add(new Counter(name, help));
  }
  gauge(name: string, help: string): Gauge {
    return this.#add(new Gauge(name, help));
  }
  histogram(name: string, help: string, buckets: readonly number[]): Histogram {
    return this.#add(new Histogram(name, help, buckets));
  }

  #add<T extends Metric>(m: T): T {
    if (this.#metrics.some((x) => x.name === m.name)) throw new Error(`metric ${m.name} registered twice`);
    this.#metrics.push(m);
    return m;
  }

  /** The exposition text (version 0.0.4). */
  render(): string {
    return this.#metrics.flatMap((m) => [...m.header(), ...m.render()]).join("\n") + "\n";
  }
}
