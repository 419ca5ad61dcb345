/**
 * @module A progress bar for long replays, written to an injected writer (stderr on the CLI): on a terminal one line
 * redrawn in place at most every `minIntervalMs`; otherwise (CI logs) a line per 10% so logs stay short.
 */

export interface ProgressOptions {
  write(text: string): void;
  tty: boolean;
  /** Milliseconds (any monotonic clock). */
  now(): number;
  minIntervalMs?: number;
  width?: number;
}

export interface ProgressState {
  sent: number;
  done: number;
  errors: number;
  total: number;
}

export class ProgressBar {
  #label = "";
  #last = -Infinity;
  #decile = -1;
  #started = 0;

  constructor(private readonly o: ProgressOptions) {}

  start(label: string): void {
    this.#label = label;
    this.#last = -Infinity;
    this.#decile = -1;
    this.#started = this.o.now();
  }

  /** The line for a state (exposed for tests). */
  render(s: ProgressState): string {
    const width = this.o.width ?? 30;
    const frac = s.total > 0 ? s.done / s.total : 1;
    const full = Math.round(frac * width);
    const bar = "#".repeat(full) + "-".repeat(width - full);
    const secs = ((this.o.now() - this.#started) / 1000).toFixed(0);
    const err = s.errors > 0 ? ` errors ${s.errors}` : "";
    return `${this.#label.padEnd(14)} [${bar}] ${String(Math.round(frac * 100)).padStart(3)}% ${s.done}/${s.total} in flight ${s.sent - s.done}${err} ${secs}s`;
  }

  update(s: ProgressState): void {
    const t = this.o.now();
    if (this.o.tty) {
      if (t - this.#last < (this.o.minIntervalMs ?? 100) && s.done < s.total) return;
      this.#last = t;
      this.o.write(`\r\x1b[2K${this.render(s)}`);
      return;
    }
    const decile = s.total > 0 ? Math.floor((10 * s.done) / s.total) : 10;
    if (decile <= this.#decile) return;
    this.#decile = decile;
    this.o.write(`${this.render(s)}\n`);
  }

  /** Ends the bar's line with a closing note. */
  finish(note: string): void {
    this.o.write(this.o.tty ? `\r\x1b[2K${this.#label.padEnd(14)} ${note}\n` : `${this.#label.padEnd(14)} ${note}\n`);
  }
}
