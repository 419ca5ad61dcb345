/**
 * @module The decision log on Node: lines are buffered and appended to FILE asynchronously (a write per decision would
 * block routing on the disk), FILE rotates to FILE.1 (FILE.1 to FILE.2, …) before a line would take it past maxBytes,
 * and only `keep` rotated files stay. Memory is bounded: past 16 MB of unwritten lines, new ones are dropped and counted.
 */
import { open, rename, rm, stat, type FileHandle } from "node:fs/promises";
import type { DecisionLogOptions, DecisionLogWriter } from "../../decisions/decision-log-sink.ts";

const FLUSH_MS = 50;
const FLUSH_BYTES = 1 << 20;
const MAX_BUFFERED = 16 << 20;

export class DecisionLogFile implements DecisionLogWriter {
  #pending: string[] = [];
  #pendingBytes = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #chain: Promise<void> = Promise.resolve();
  #handle: FileHandle | undefined;
  #size = -1;
  #dropped = 0;
  #failed = false;
  #closed = false;

  constructor(private readonly options: DecisionLogOptions, private readonly warn: (message: string) => void = () => {}) {
    if (!(options.maxBytes > 0)) throw new RangeError("decision log maxBytes must be > 0");
  }

  /** Lines dropped because the disk could not keep up (or writing failed). */
  get dropped(): number {
    return this.#dropped;
  }

  append(line: string): void {
    if (this.#closed || this.#failed) {
      this.#dropped++;
      return;
    }
    if (this.#pendingBytes > MAX_BUFFERED) {
      if (this.#dropped++ === 0) this.warn(`decision log ${this.options.path}: writing falls behind; dropping lines`);
      return;
    }
    this.#pending.push(line);
    this.#pendingBytes += line.length + 1;
    if (this.#pendingBytes >= FLUSH_BYTES) this.#flushSoon(0);
    else this.#flushSoon(FLUSH_MS);
  }

  #flushSoon(ms: number): void {
    if (this.#timer !== undefined) {
      if (ms > 0) return;
      clearTimeout(this.#timer);
    }
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.flush();
    }, ms);
    // A pending flush must not keep a process alive that is otherwise done; close() flushes what is left.
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /** Writes what is buffered; resolves once it is written. */
  flush(): Promise<void> {
    const lines = this.#pending;
    this.#pending = [];
    this.#pendingBytes = 0;
    if (lines.length > 0) this.#chain = this.#chain.then(() => this.#write(lines)).catch((e: unknown) => this.#fail(e, lines.length));
    return this.#chain;
  }

  #fail(e: unknown, lost: number): void {
    this.#failed = true;
    this.#dropped += lost;
    this.warn(`decision log ${this.options.path}: ${(e as Error).message}; no more decisions are logged`);
  }

  async #write(lines: string[]): Promise<void> {
    if (this.#size < 0) await this.#open();
    let chunk: string[] = [];
    let chunkBytes = 0;
    for (const line of lines) {
      const bytes = Buffer.byteLength(line) + 1;
      if (this.#size + chunkBytes > 0 && this.#size + chunkBytes + bytes > this.options.maxBytes) {
        await this.#put(chunk, chunkBytes);
        chunk = [];
        chunkBytes = 0;
        await this.#rotate();
      }
      chunk.push(line);
      chunkBytes += bytes;
    }
    await this.#put(chunk, chunkBytes);
  }

  async #put(chunk: string[], bytes: number): Promise<void> {
    if (chunk.length === 0) return;
    await this.#handle!.write(chunk.join("\n") + "\n");
    this.#size += bytes;
  }

  async #open(): Promise<void> {
    this.#handle = await open(this.options.path, "a");
    this.#size = (await stat(this.options.path)).size;
  }

  /** FILE.(keep) goes, FILE.(k-1) becomes FILE.k, FILE becomes FILE.1, and a new FILE starts. */
  async #rotate(): Promise<void> {
    const { path, keep } = this.options;
    await this.#handle?.close();
    this.#handle = undefined;
    await rm(keep > 0 ? `${path}.${keep}` : path, { force: true });
    for (let k = keep; k >= 1; k--) {
      const from = k === 1 ? path : `${path}.${k - 1}`;
      await rename(from, `${path}.${k}`).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== "ENOENT") throw e;
      });
    }
    await this.#open();
  }

  async close(): Promise<void> {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.flush();
    this.#closed = true;
    await this.#handle?.close();
    this.#handle = undefined;
  }
}

export function openDecisionLogFile(options: DecisionLogOptions, warn: (message: string) => void): DecisionLogWriter {
  return new DecisionLogFile(options, warn);
}
