/**
 * @module The decision log as a DecisionSink: formats each booked decision (decision-log-format.ts) and hands the
 * line to a runtime's writer (the Node one is src/adapter/node/decision-log-file.ts), which owns files and rotation.
 */
import type { DecisionRecord, DecisionSink } from "../routing/index.ts";
import { formatDecisionLine } from "./decision-log-format.ts";

/** Appends lines somewhere bounded; implementations buffer and never throw from append. */
export interface DecisionLogWriter {
  append(line: string): void;
  /** Writes what is buffered and closes; resolves once it is on disk. */
  close(): Promise<void>;
}

export interface DecisionLogOptions {
  path: string;
  /** Size at which the file is rotated to path.1 (path.1 to path.2, …). */
  maxBytes: number;
  /** Rotated files kept; older ones are deleted. */
  keep: number;
}

/** How a host opens the decision log (Node: decision-log-file.ts); absent on runtimes without a file system. */
export type DecisionLogFactory = (options: DecisionLogOptions, warn: (message: string) => void) => DecisionLogWriter;

export class DecisionLogSink implements DecisionSink {
  readonly detail = "inputs" as const;
  #lines = 0;

  constructor(private readonly writer: DecisionLogWriter, readonly tokens = false) {}

  get lines(): number {
    return this.#lines;
  }

  decided(record: DecisionRecord): void {
    this.writer.append(formatDecisionLine(record));
    this.#lines++;
  }

  close(): Promise<void> {
    return this.writer.close();
  }
}
