/**
 * @module Splits an upstream SSE byte stream into complete events without re-encoding them, so the gateway can
 * forward each event's exact bytes as soon as it is complete and never forward half an event from a worker
 * that died mid-write.
 */

const LF = 10;
const CR = 13;

export interface SseEvent {
  /** The event's bytes including its terminating blank line, exactly as received. */
  raw: Uint8Array;
  /** The joined `data:` lines (undefined when the event has none, e.g. a comment or keep-alive). */
  data?: string;
}

export class SseSplitter {
  #pending: Uint8Array = new Uint8Array(0);
  readonly #decoder = new TextDecoder();
  readonly #maxEventBytes: number;

  constructor(maxEventBytes = 4 << 20) {
    this.#maxEventBytes = maxEventBytes;
  }

  /** Bytes received but not yet part of a complete event. */
  get pendingBytes(): number {
    return this.#pending.length;
  }

  /** Feeds a chunk; returns the events it completed. Throws when one event exceeds the size bound. */
  push(chunk: Uint8Array): SseEvent[] {
    const buf = this.#pending.length === 0 ? chunk : concat(this.#pending, chunk);
    const events: SseEvent[] = [];
    let start = 0;
    // An event ends at an empty line: "\n\n", "\r\n\r\n" or "\r\r" (the three line endings SSE allows).
    // Engines end lines with LF only: then native indexOf hops from LF to LF instead of a loop over every byte.
    if (buf.indexOf(CR) < 0) {
      for (let i = buf.indexOf(LF); i >= 0 && i + 1 < buf.length; i = buf.indexOf(LF, i + 1)) {
        if (buf[i + 1] !== LF) continue;
        const raw = buf.subarray(start, i + 2);
        events.push({ raw, data: this.#data(raw) });
        start = i + 2;
        i++;
      }
    } else {
      for (let i = 0; i < buf.length; i++) {
        const end = eventEnd(buf, i);
        if (end < 0) continue;
        const raw = buf.subarray(start, end);
        events.push({ raw, data: this.#data(raw) });
        start = end;
        i = end - 1;
      }
    }
    this.#pending = buf.slice(start);
    if (this.#pending.length > this.#maxEventBytes) throw new RangeError(`SSE event larger than ${this.#maxEventBytes} bytes`);
    return events;
  }

  #data(raw: Uint8Array): string | undefined {
    // Fast path for the shape engines send: one `data: …` line ended by "\n\n" (no other LF, no CR).
    const n = raw.length;
    if (n >= 8 && raw[0] === 100 && raw[4] === 58 && raw[5] === 32 && raw.indexOf(LF) === n - 2 && raw.indexOf(CR) < 0 &&
      raw[1] === 97 && raw[2] === 116 && raw[3] === 97) {
      return this.#decoder.decode(raw.subarray(6, n - 2));
    }
    const text = this.#decoder.decode(raw);
    let data: string | undefined;
    for (const line of text.split(/\r\n|\r|\n/)) {
      if (!line.startsWith("data:")) continue;
      const v = line.slice(line.charCodeAt(5) === 32 ? 6 : 5);
      data = data === undefined ? v : `${data}\n${v}`;
    }
    return data;
  }
}

/** If an event terminator ends at or after position i (the blank line starting at i), the index just past it. */
function eventEnd(b: Uint8Array, i: number): number {
  const c = b[i];
  if (c === LF && b[i + 1] === LF) return i + 2;
  if (c === CR && b[i + 1] === LF && b[i + 2] === CR && b[i + 3] === LF) return i + 4;
  if (c === CR && b[i + 1] === CR) return i + 2;
  return -1;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
